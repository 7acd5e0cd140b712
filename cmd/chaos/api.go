package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/batchwork/batchwork/shared/localauth"
)

// ownerHeader is the identity the local runner trusts on loopback
// (shared/runner.OwnerHeader).
const ownerHeader = "X-Batchwork-Owner"

// owner is the chaos run's caller identity.
const owner = "chaos"

// apiClient talks to the local runner's API as a client would: over
// HTTP, retrying what a client retries (transport errors, 5xx, 429) with
// the same idempotency key, since the control plane under test injects
// faults into its own requests too.
type apiClient struct {
	base  string
	token string // the runner's per-run API token
	hc    *http.Client
}

func newAPIClient(base, token string) *apiClient {
	return &apiClient{base: base, token: token, hc: &http.Client{Timeout: 30 * time.Second}}
}

// retryFor bounds a call's retries: long enough to ride out a burst of
// injected faults, short enough that a broken API fails the run.
const retryFor = time.Minute

// do sends one request until it gets an answer that is not worth retrying.
func (c *apiClient) do(ctx context.Context, method, path, idemKey string, body []byte) (int, []byte, error) {
	deadline := time.Now().Add(retryFor)
	wait := 100 * time.Millisecond
	for {
		status, out, err := c.once(ctx, method, path, idemKey, body)
		if err == nil && status < 500 && status != http.StatusTooManyRequests {
			return status, out, nil
		}
		if err == nil {
			err = fmt.Errorf("%s %s: %d %s", method, path, status, bytes.TrimSpace(out))
		}
		if time.Now().After(deadline) {
			return 0, nil, fmt.Errorf("gave up after %s: %w", retryFor, err)
		}
		select {
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

func (c *apiClient) once(ctx context.Context, method, path, idemKey string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set(ownerHeader, owner)
	localauth.SetHeader(req, c.token)
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// submit creates a job (or finds the one its key made) and returns its id.
func (c *apiClient) submit(ctx context.Context, key string, spec []byte) (string, error) {
	status, out, err := c.do(ctx, http.MethodPost, "/jobs", key, spec)
	if err != nil {
		return "", fmt.Errorf("submit %s: %w", key, err)
	}
	if status != http.StatusCreated && status != http.StatusOK {
		return "", fmt.Errorf("submit %s: %d %s", key, status, bytes.TrimSpace(out))
	}
	var res struct {
		JobID string `json:"jobId"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.JobID == "" {
		return "", fmt.Errorf("submit %s: answer %q: %v", key, out, err)
	}
	return res.JobID, nil
}

// cancel cancels a job. accepted is true when the job is CANCELLED, and
// at is when the accepting call returned (the cancel had applied by
// then); false with no error means the job had already ended.
func (c *apiClient) cancel(ctx context.Context, id string) (accepted bool, at time.Time, err error) {
	status, out, err := c.do(ctx, http.MethodPost, "/jobs/"+id+"/cancel", "", nil)
	at = time.Now()
	switch {
	case err != nil:
		return false, at, fmt.Errorf("cancel %s: %w", id, err)
	case status == http.StatusOK:
		return true, at, nil
	case status == http.StatusConflict:
		return false, at, nil
	}
	return false, at, fmt.Errorf("cancel %s: %d %s", id, status, bytes.TrimSpace(out))
}

// deleteJob deletes an ended job and everything of it, calling again
// while the control plane answers 202 (it stopped at its budget; a
// repeat is safe). A 404 after a call whose answer was a retried 5xx
// means the job is gone.
func (c *apiClient) deleteJob(ctx context.Context, id string) error {
	for range 100 {
		status, out, err := c.do(ctx, http.MethodDelete, "/jobs/"+id, "", nil)
		switch {
		case err != nil:
			return fmt.Errorf("delete %s: %w", id, err)
		case status == http.StatusOK || status == http.StatusNotFound:
			return nil
		case status != http.StatusAccepted:
			return fmt.Errorf("delete %s: %d %s", id, status, bytes.TrimSpace(out))
		}
	}
	return fmt.Errorf("delete %s: still incomplete after 100 calls", id)
}

// rerun submits the rerun of an ended job from stage from and returns the
// new job's id; key is the request's Idempotency-Key, so that a retry
// after a lost answer finds the job it made.
func (c *apiClient) rerun(ctx context.Context, id, from, key string) (string, error) {
	body, err := json.Marshal(map[string]string{"from": from})
	if err != nil {
		return "", err
	}
	status, out, err := c.do(ctx, http.MethodPost, "/jobs/"+id+"/rerun", key, body)
	switch {
	case err != nil:
		return "", fmt.Errorf("rerun %s: %w", id, err)
	case status != http.StatusCreated && status != http.StatusOK:
		return "", fmt.Errorf("rerun %s: %d %s", id, status, bytes.TrimSpace(out))
	}
	var res struct {
		JobID string `json:"jobId"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.JobID == "" {
		return "", fmt.Errorf("rerun %s: answer %q: %v", id, out, err)
	}
	return res.JobID, nil
}

// redrive redrives a FAILED job. The body names the redrives the caller
// saw (none), the request's token: a retry after a lost answer finds the
// job redriven past it and does not redrive it again.
func (c *apiClient) redrive(ctx context.Context, id string) error {
	status, out, err := c.do(ctx, http.MethodPost, "/jobs/"+id+"/redrive", "", []byte(`{"redrives":0}`))
	switch {
	case err != nil:
		return fmt.Errorf("redrive %s: %w", id, err)
	case status != http.StatusOK:
		return fmt.Errorf("redrive %s: %d %s", id, status, bytes.TrimSpace(out))
	}
	return nil
}
