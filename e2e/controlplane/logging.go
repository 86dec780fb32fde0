package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"runtime/debug"

	"golang.org/x/sys/unix"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// progress is where the few human-readable lines for the test output go:
// the process's original stderr, once setupLogging has run.
var progress io.Writer = os.Stderr

// logf writes a short progress line.
func (o *options) logf(format string, args ...any) {
	fmt.Fprintf(progress, "[%s] %s\n", o.name, fmt.Sprintf(format, args...))
}

// setupLogging sends everything the Kubernetes and etcd libraries log to
// DATA/controlplane.log, so stderr carries only our progress lines.
//
// klog, the standard logger and etcd's server logger can be pointed at a
// file, but the apiserver's etcd client builds a zap logger on os.Stderr at
// init time and nothing exported reconfigures it. So file descriptor 2
// itself becomes the log file and progress keeps a duplicate of the
// original; Go runtime crashes are copied to that duplicate too.
func setupLogging(o *options) error {
	path := filepath.Join(o.dataDir, "controlplane.log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	origFD, err := unix.Dup(int(os.Stderr.Fd()))
	if err != nil {
		return fmt.Errorf("dup stderr: %w", err)
	}
	unix.CloseOnExec(origFD)
	orig := os.NewFile(uintptr(origFD), "stderr")
	if err := unix.Dup2(int(f.Fd()), int(os.Stderr.Fd())); err != nil {
		return fmt.Errorf("redirect stderr: %w", err)
	}
	progress = orig
	if err := debug.SetCrashOutput(orig, debug.CrashOptions{}); err != nil {
		return err
	}

	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for k, v := range map[string]string{
		"logtostderr":     "false",
		"alsologtostderr": "false",
		"stderrthreshold": "FATAL",
		// Without this an error is written once per severity at or below
		// its own, and all of them go to the same file.
		"one_output": "true",
		"v":          "0",
	} {
		if err := fs.Set(k, v); err != nil {
			return err
		}
	}
	klog.SetOutput(f)
	log.SetOutput(f)
	// klog.Fatal in a component is a fatal control-plane error: exit with
	// our own error code and say where the details (and stacks) are.
	klog.OsExit = func(int) {
		o.logf("error: fatal error in a control plane component, see %s", path)
		os.Exit(1)
	}
	// The apiserver's loopback client would otherwise log warnings about
	// requests it makes to itself.
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	return nil
}
