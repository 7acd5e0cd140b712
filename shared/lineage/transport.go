package lineage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Doer sends an HTTP request (*http.Client): the transport's port.
type Doer interface {
	Do(req *http.Request) (*http.Response, error)
}

var _ Doer = (*http.Client)(nil)

// Transport is OpenLineage's HTTP transport: each event is a POST of its
// JSON to the endpoint, with the API key, if any, as a bearer token.
type Transport struct {
	// Endpoint is the full URL events are POSTed to
	// (<OPENLINEAGE_URL>/api/v1/lineage).
	Endpoint string
	// APIKey, when set, is sent as "Authorization: Bearer <key>".
	APIKey string
	Client Doer
	// Attempts is how many times one Send tries (at least once), each
	// within AttemptTimeout and the caller's context.
	Attempts       int
	AttemptTimeout time.Duration
	// Backoff is the wait before the second attempt, doubled after.
	Backoff time.Duration
}

// Defaults of a transport: a send that keeps failing costs a caller
// about four seconds at most, and the outbox tries it again later.
const (
	DefaultAttempts       = 2
	DefaultAttemptTimeout = 2 * time.Second
	DefaultBackoff        = 200 * time.Millisecond
)

// ErrRejected means the endpoint refused an event as such (400, 413,
// 422): sending it again would be refused again.
var ErrRejected = errors.New("openlineage endpoint rejected the event")

// Send POSTs one event's JSON body. A failure that may pass (the network,
// a timeout, 408, 429, 5xx, and 401, 403 and 404, which a fix of the
// endpoint's configuration cures) is tried again within the attempts; a
// rejection of the event is an error wrapping ErrRejected at once.
func (t *Transport) Send(ctx context.Context, body []byte) error {
	wait := t.Backoff
	var err error
	for attempt := range max(t.Attempts, 1) {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w (before that: %w)", ctx.Err(), err)
			case <-time.After(wait):
			}
			wait *= 2
		}
		err = t.send(ctx, body)
		if err == nil || errors.Is(err, ErrRejected) {
			return err
		}
	}
	return err
}

func (t *Transport) send(ctx context.Context, body []byte) error {
	if t.AttemptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.AttemptTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.Endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("post lineage event: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if t.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.APIKey)
	}
	resp, err := t.Client.Do(req)
	if err != nil {
		return fmt.Errorf("post lineage event: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return nil
	case c == http.StatusBadRequest || c == http.StatusRequestEntityTooLarge || c == http.StatusUnprocessableEntity:
		return fmt.Errorf("%w: %s: %s", ErrRejected, resp.Status, bytes.TrimSpace(msg))
	default:
		return fmt.Errorf("post lineage event: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
}
