package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// componentStopTimeout is how long stop waits for the apiserver and
// controller manager together; it leaves room for etcd to close within
// shutdownDeadline.
const componentStopTimeout = 10 * time.Second

type controlPlane struct {
	info readyInfo
	// failed receives an error if a component stops on its own.
	failed chan error

	etcd              *embed.Etcd
	apiserverDone     <-chan error
	controllerMgrDone <-chan error
}

// startControlPlane brings the components up in dependency order. It
// returns a non-nil controlPlane whenever something was started, so the
// caller can stop it even after an error.
func startControlPlane(ctx context.Context, o *options) (*controlPlane, error) {
	cp := &controlPlane{failed: make(chan error, 2)}

	creds, err := ensureCredentials(o.dataDir, o.name)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}

	var clientPort int
	cp.etcd, clientPort, err = startEtcdOnFreePorts(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}

	// Holding the apiserver's listener from here on (rather than probing a
	// free port and closing it) means nobody can steal the port we are about
	// to write into the kubeconfig.
	ln, apiPort, err := listenLoopback(o.apiserverPort)
	if err != nil {
		return cp, fmt.Errorf("apiserver port: %w", err)
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)

	adminKubeconfig := filepath.Join(o.dataDir, "kubeconfig")
	if err := writeKubeconfig(adminKubeconfig, o.name, server, creds.caPEM, "ferry-admin", creds.adminToken); err != nil {
		ln.Close()
		return cp, err
	}
	cmKubeconfig := filepath.Join(o.dataDir, "controller-manager.kubeconfig")
	if err := writeKubeconfig(cmKubeconfig, o.name, server, creds.caPEM, controllerManagerUser, creds.controllerManagerToken); err != nil {
		ln.Close()
		return cp, err
	}

	o.logf("starting kube-apiserver on %s", server)
	cp.apiserverDone, err = startAPIServer(ctx, o, creds, ln, clientPort)
	if err != nil {
		return cp, fmt.Errorf("kube-apiserver: %w", err)
	}
	if err := waitOK(ctx, server, "/readyz", creds, cp.apiserverDone); err != nil {
		return cp, fmt.Errorf("kube-apiserver: %w", err)
	}

	o.logf("starting kube-controller-manager")
	cp.controllerMgrDone, err = startControllerManager(ctx, cmKubeconfig, creds)
	if err != nil {
		return cp, fmt.Errorf("kube-controller-manager: %w", err)
	}
	// The serviceaccount controller creating default/default shows the
	// controller manager is connected and its informers have synced; before
	// that, Pods in fresh namespaces are refused for lack of a ServiceAccount.
	if err := waitOK(ctx, server, "/api/v1/namespaces/default/serviceaccounts/default", creds, cp.controllerMgrDone); err != nil {
		return cp, fmt.Errorf("kube-controller-manager: %w", err)
	}

	go forwardUnexpectedExit(ctx, "kube-apiserver", cp.apiserverDone, cp.failed)
	go forwardUnexpectedExit(ctx, "kube-controller-manager", cp.controllerMgrDone, cp.failed)
	go forwardUnexpectedExit(ctx, "etcd", cp.etcd.Err(), cp.failed)

	cp.info = readyInfo{
		Name:           o.name,
		Kubeconfig:     adminKubeconfig,
		Server:         server,
		Token:          creds.adminToken,
		CAFile:         creds.caFile,
		EtcdClientPort: clientPort,
		AuditLog:       o.auditLog,
	}
	return cp, nil
}

// startEtcdOnFreePorts starts etcd, retrying with fresh ports if one it
// picked itself was taken in the moment between probing and binding (more
// likely when a test suite starts many control planes at once).
func startEtcdOnFreePorts(ctx context.Context, o *options) (*embed.Etcd, int, error) {
	const attempts = 3
	for attempt := 1; ; attempt++ {
		clientPort, err := freePort(o.etcdClientPort)
		if err != nil {
			return nil, 0, fmt.Errorf("client port: %w", err)
		}
		peerPort, err := freePort(o.etcdPeerPort)
		if err != nil {
			return nil, 0, fmt.Errorf("peer port: %w", err)
		}
		o.logf("starting etcd on 127.0.0.1:%d", clientPort)
		e, err := startEtcd(ctx, o, clientPort, peerPort)
		if err == nil {
			return e, clientPort, nil
		}
		portsPicked := o.etcdClientPort == 0 || o.etcdPeerPort == 0
		if attempt == attempts || !portsPicked || !errors.Is(err, syscall.EADDRINUSE) {
			return nil, 0, err
		}
		o.logf("etcd: %v; retrying with other ports", err)
	}
}

// forwardUnexpectedExit reports a component that stops before we asked it
// to. It may take the component's result from done; stop still sees the
// channel closed right after, so it never waits for a value already taken.
func forwardUnexpectedExit(ctx context.Context, name string, done <-chan error, failed chan<- error) {
	select {
	case <-ctx.Done():
	case err, ok := <-done:
		if ctx.Err() != nil {
			return
		}
		if !ok || err == nil {
			err = fmt.Errorf("exited")
		}
		failed <- fmt.Errorf("%s stopped unexpectedly: %w", name, err)
	}
}

// stop assumes the context passed to startControlPlane has been cancelled.
// The apiserver and controller manager wind down concurrently; etcd goes
// last because the apiserver flushes to it while draining.
func (cp *controlPlane) stop(o *options) {
	// A context rather than a timer channel: both waits below must see it.
	deadline, cancel := context.WithTimeout(context.Background(), componentStopTimeout)
	defer cancel()
	waitFor := func(name string, done <-chan error) {
		if done == nil {
			return
		}
		select {
		case err, ok := <-done:
			if ok && err != nil {
				o.logf("%s stopped with error: %v", name, err)
			}
		case <-deadline.Done():
			o.logf("%s did not stop within %s", name, componentStopTimeout)
		}
	}
	waitFor("kube-controller-manager", cp.controllerMgrDone)
	waitFor("kube-apiserver", cp.apiserverDone)
	if cp.etcd != nil {
		cp.etcd.Close()
	}
	o.logf("stopped")
}
