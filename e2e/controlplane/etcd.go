package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

const etcdStartTimeout = 60 * time.Second

func startEtcd(ctx context.Context, o *options, clientPort, peerPort int) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = o.name
	cfg.Dir = filepath.Join(o.dataDir, "etcd")

	clientURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", clientPort)}
	peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", peerPort)}
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", cfg.Name, peerURL.String())
	cfg.Logger = "zap"
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{filepath.Join(o.dataDir, "etcd.log")}
	// NewConfig leaves this at 0 (only etcd's own flag parsing applies the
	// default), which logs every single request as "expensive".
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration

	// Test clusters are disposable; skipping fsync makes every API write
	// noticeably cheaper on slow CI disks.
	cfg.UnsafeNoFsync = true

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	case <-time.After(etcdStartTimeout):
		e.Server.Stop()
		e.Close()
		return nil, errors.New("not ready in time")
	}
}
