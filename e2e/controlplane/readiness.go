package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

const readyTimeout = 90 * time.Second

// waitOK polls server+path the way a client would (admin token and CA, no
// shortcuts through the loopback config) until it answers 200, so READY
// means reachable from outside. It gives up early if a component whose
// progress it is waiting for exits.
func waitOK(ctx context.Context, server, path string, creds *credentials, componentDone <-chan error) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(creds.caPEM) {
		return errors.New("cannot parse CA certificate")
	}
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	defer client.CloseIdleConnections()

	deadline := time.After(readyTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastProblem := "no response"
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err, ok := <-componentDone:
			if ok && err != nil {
				return err
			}
			return errors.New("exited before becoming ready")
		case <-deadline:
			return fmt.Errorf("%s not OK after %s: %s", path, readyTimeout, lastProblem)
		case <-tick.C:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+creds.adminToken)
		resp, err := client.Do(req)
		if err != nil {
			lastProblem = err.Error()
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		lastProblem = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, body)
	}
}
