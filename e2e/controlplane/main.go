// Command controlplane runs a real Kubernetes control plane (embedded etcd,
// kube-apiserver and a trimmed kube-controller-manager) in a single process,
// so that ferry's end-to-end tests can start several throwaway clusters
// without containers, kubelets or downloaded binaries.
//
// The Rust test harness parses the single READY line printed on stdout; all
// other output goes to stderr (a few progress lines) or to log files under
// --data-dir (controlplane.log for kube-apiserver and kube-controller-manager,
// etcd.log). Build with build.sh, which also stamps the Kubernetes version.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// shutdownDeadline bounds a graceful stop; past it the process exits anyway,
// because a test harness waiting on a wedged control plane is worse than an
// unclean etcd directory that nobody reuses.
const shutdownDeadline = 15 * time.Second

type options struct {
	dataDir          string
	name             string
	auditLog         string
	apiserverPort    int
	etcdClientPort   int
	etcdPeerPort     int
	exitOnStdinClose bool
	watchCache       bool
}

// readyInfo is the contract with the Rust harness; field order and names
// are part of it.
type readyInfo struct {
	Name           string `json:"name"`
	Kubeconfig     string `json:"kubeconfig"`
	Server         string `json:"server"`
	Token          string `json:"token"`
	CAFile         string `json:"caFile"`
	EtcdClientPort int    `json:"etcdClientPort"`
	AuditLog       string `json:"auditLog"`
}

func main() {
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "controlplane: %v\n", err)
		os.Exit(2)
	}
	os.Exit(run(opts))
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("controlplane", flag.ContinueOnError)
	fs.StringVar(&o.dataDir, "data-dir", "", "directory for etcd data, certificates, kubeconfig and logs (required)")
	fs.StringVar(&o.name, "name", "ferry", "name used in log prefixes and certificate subjects")
	fs.StringVar(&o.auditLog, "audit-log", "", "if set, write a JSON audit log of all write requests to this file")
	fs.IntVar(&o.apiserverPort, "apiserver-port", 0, "kube-apiserver port on 127.0.0.1 (0 picks a free port)")
	fs.IntVar(&o.etcdClientPort, "etcd-client-port", 0, "etcd client port on 127.0.0.1 (0 picks a free port)")
	fs.IntVar(&o.etcdPeerPort, "etcd-peer-port", 0, "etcd peer port on 127.0.0.1 (0 picks a free port)")
	fs.BoolVar(&o.watchCache, "watch-cache", true, "serve watches from the API server's watch cache; off, every watch reads etcd, so one from a compacted resource version fails with 410 Gone")
	fs.BoolVar(&o.exitOnStdinClose, "exit-on-stdin-close", false, "shut down when stdin reaches EOF (so the control plane dies with its parent)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.dataDir == "" {
		return nil, errors.New("--data-dir is required")
	}
	abs, err := filepath.Abs(o.dataDir)
	if err != nil {
		return nil, err
	}
	o.dataDir = abs
	if o.auditLog != "" {
		if o.auditLog, err = filepath.Abs(o.auditLog); err != nil {
			return nil, err
		}
	}
	return o, nil
}

func run(o *options) int {
	start := time.Now()
	if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
		o.logf("error: %v", err)
		return 1
	}
	if err := setupLogging(o); err != nil {
		o.logf("error: %v", err)
		return 1
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Before READY nobody holds a handle on this control plane, and the
	// apiserver treats a cancelled context during startup as fatal (its
	// post-start hooks klog.Fatal with stack dumps), so a stop requested
	// then just exits. Afterwards it cancels ctx for a graceful shutdown.
	var (
		mu         sync.Mutex
		ready      bool
		stopReason string
	)
	requestStop := func(reason string) {
		mu.Lock()
		defer mu.Unlock()
		if !ready {
			o.logf("stopped during startup (%s)", reason)
			os.Exit(0)
		}
		if stopReason == "" {
			stopReason = reason
		}
		cancel()
	}
	watchSignals(o, requestStop)
	if o.exitOnStdinClose {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			requestStop("stdin closed")
		}()
	}
	// Once a stop has been requested, nothing may keep the process alive
	// for longer than the deadline, wherever shutdown hangs.
	go func() {
		<-ctx.Done()
		time.Sleep(shutdownDeadline)
		o.logf("shutdown did not finish within %s, forcing exit", shutdownDeadline)
		klog.Flush()
		os.Exit(1)
	}()

	cp, err := startControlPlane(ctx, o)
	if cp != nil {
		// Components stop when the context is cancelled, which also arms
		// the watchdog above; on startup errors nothing else cancels it.
		defer func() {
			cancel()
			cp.stop(o)
		}()
	}
	if err != nil {
		o.logf("error: %v", err)
		return 1
	}

	line, err := json.Marshal(cp.info)
	if err != nil {
		o.logf("error: %v", err)
		return 1
	}
	mu.Lock()
	ready = true
	o.logf("ready in %.1fs", time.Since(start).Seconds())
	// os.Stdout is unbuffered, so the harness sees the line immediately.
	_, err = os.Stdout.Write([]byte("FERRY_CONTROLPLANE_READY " + string(line) + "\n"))
	mu.Unlock()
	if err != nil {
		o.logf("error: writing READY line: %v", err)
		return 1
	}

	select {
	case <-ctx.Done():
		mu.Lock()
		o.logf("shutting down (%s)", stopReason)
		mu.Unlock()
		return 0
	case err := <-cp.failed:
		o.logf("error: %v; shutting down", err)
		cancel()
		return 1
	}
}

func watchSignals(o *options, requestStop func(string)) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := <-sigs
		requestStop("received " + sig.String())
		// A second signal means the caller has lost patience.
		sig = <-sigs
		o.logf("received second %s, exiting immediately", sig)
		os.Exit(1)
	}()
}

// listenLoopback binds 127.0.0.1:port (port 0 picks a free one).
func listenLoopback(port int) (net.Listener, int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, 0, err
	}
	return ln, ln.Addr().(*net.TCPAddr).Port, nil
}

// freePort resolves port 0 to a currently free loopback port, for servers
// (etcd) that only accept addresses rather than listeners. There is a small
// window in which another process could take it; tests live with that.
func freePort(port int) (int, error) {
	if port != 0 {
		return port, nil
	}
	ln, p, err := listenLoopback(0)
	if err != nil {
		return 0, err
	}
	return p, ln.Close()
}
