package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	apiserveroptions "k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// auditPolicy records every request of a ServiceAccount (reads, watches
// and writes: the install test proves from them that each rule of the
// charts' roles is used by ferry running with the charts' tokens), each
// write once (at ResponseComplete: RequestReceived
// is omitted so one request is one line), which is what tests need to count
// writes, and the admin identity's reads of single objects, which show that
// an agent running as that identity really re-checked them (a pass happened)
// while it wrote nothing.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: Metadata
  users: ["ferry-admin"]
  verbs: ["get"]
`

// startAPIServer builds kube-apiserver options from the same flags its
// binary takes, then runs the server on ln until ctx is cancelled. The
// returned channel yields Run's result and is then closed.
//
// We drive options and app.Run ourselves instead of the cobra command
// because the command installs a process-wide signal handler (which panics
// if installed twice) and owns the shutdown context.
func startAPIServer(ctx context.Context, o *options, creds *credentials, ln net.Listener, etcdPort int) (<-chan error, error) {
	args := []string{
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdPort),
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", ln.Addr().(*net.TCPAddr).Port),
		"--advertise-address=127.0.0.1",
		// There are no real endpoints behind the kubernetes Service and no
		// other apiservers to coordinate with.
		"--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=10.0.0.0/24",
		// No kube-proxy routes ClusterIPs here: the API server resolves a
		// Service to its EndpointSlices' addresses instead, for webhooks
		// registered by a service reference (and aggregated APIs).
		"--enable-aggregator-routing=true",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--api-audiences=https://kubernetes.default.svc",
		"--service-account-key-file=" + creds.saPubFile,
		"--service-account-signing-key-file=" + creds.saKeyFile,
		"--token-auth-file=" + creds.tokenFile,
		"--authorization-mode=RBAC",
		"--tls-cert-file=" + creds.serverCertFile,
		"--tls-private-key-file=" + creds.serverKeyFile,
		"--client-ca-file=" + creds.caFile,
		"--cert-dir=" + filepath.Join(o.dataDir, "pki"),
		// Priority and fairness is pointless with one client and costs
		// memory and goroutines per control plane.
		"--enable-priority-and-fairness=false",
	}
	if !o.watchCache {
		args = append(args, "--watch-cache=false")
	}
	if o.auditLog != "" {
		policyFile := filepath.Join(o.dataDir, "audit-policy.yaml")
		if err := os.WriteFile(policyFile, []byte(auditPolicy), 0o600); err != nil {
			return nil, err
		}
		args = append(args,
			"--audit-policy-file="+policyFile,
			"--audit-log-path="+o.auditLog,
			"--audit-log-format=json",
			// Blocking: the entry is on disk before the response is sent,
			// so a test may read the log right after its request returns.
			"--audit-log-mode=blocking",
		)
	}

	s := apiserveroptions.NewServerRunOptions()
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range s.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	s.SecureServing.Listener = ln

	// The cobra command does this in PersistentPreRunE: it applies the
	// (default) emulation version and feature gates.
	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, err
	}
	completed, err := s.Complete(ctx)
	if err != nil {
		return nil, err
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return nil, utilerrors.NewAggregate(errs)
	}

	done := make(chan error, 1)
	go func() {
		defer close(done)
		done <- app.Run(ctx, completed)
	}()
	return done, nil
}
