package main

import (
	"context"
	"strings"

	"github.com/spf13/pflag"

	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
	cmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
)

// Only the controllers that act on API objects alone: with no kubelets,
// scheduler or nodes, the workload controllers would just create Pods that
// never run and add writes that tests counting requests do not expect.
var controllers = []string{
	names.GarbageCollectorController,
	names.NamespaceController,
	// Pod creation is rejected until the namespace has its "default"
	// ServiceAccount, and this controller creates it.
	names.ServiceAccountController,
	names.ServiceAccountTokenController,
}

// startControllerManager runs kube-controller-manager against the apiserver
// until ctx is cancelled. Like startAPIServer it uses options and app.Run
// directly so no second signal handler is installed.
func startControllerManager(ctx context.Context, kubeconfig string, creds *credentials) (<-chan error, error) {
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		// 0 disables the controller manager's own HTTPS endpoint; nothing
		// scrapes it in tests.
		"--secure-port=0",
		"--service-account-private-key-file=" + creds.saKeyFile,
		"--root-ca-file=" + creds.caFile,
		// Leaves time for the apiserver and etcd within the shutdown deadline.
		"--controller-shutdown-timeout=5s",
	}

	s, err := cmoptions.NewKubeControllerManagerOptions()
	if err != nil {
		return nil, err
	}
	known, disabled, aliases := app.KnownControllers(), app.ControllersDisabledByDefault(), app.ControllerAliases()
	fss := s.Flags(known, disabled, aliases)
	fs := pflag.NewFlagSet("kube-controller-manager", pflag.ContinueOnError)
	for _, f := range fss.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := s.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, err
	}
	c, err := s.Config(ctx, known, disabled, aliases)
	if err != nil {
		return nil, err
	}

	done := make(chan error, 1)
	go func() {
		defer close(done)
		done <- app.Run(ctx, c.Complete())
	}()
	return done, nil
}
