package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// OwnerHeader is the identity header the local runner trusts on loopback.
const OwnerHeader = "X-Batchwork-Owner"

// Client calls the API. Set its fields before the first call and leave
// them alone after, as with http.Client.
type Client struct {
	// Endpoint is the API's base URL; a path in it prefixes every route.
	Endpoint *url.URL
	// HTTP sends the requests; nil is a client that follows no redirect.
	HTTP *http.Client
	// Signer authenticates each request; nil sends them as they are.
	Signer Signer
	// AuthHint, when set, is added to the message of a 401: how to give
	// the credentials the caller did not find.
	AuthHint string
	// NetHint, when set, is added to the message of a NetError.
	NetHint string
	// Retries is how many times a request is sent again after a network
	// error, throttling or a gateway error; 0 sends it once.
	Retries int
	// Sleep waits between tries; nil is Sleep.
	Sleep func(context.Context, time.Duration) error
	// UserAgent names the caller; "" is "batchwork-client".
	UserAgent string
}

// Call sends one request and decodes a 2xx JSON answer into out (nil:
// the answer is dropped). path is the route's escaped path, each id in it
// escaped once with url.PathEscape (an id may hold '/', '?' or '%'); it
// is sent as it is, after the Endpoint's path. query and header may be nil; body, when not nil,
// is JSON unless header names another Content-Type. Every request is
// retried on network errors, throttling and 5xx gateway errors, with
// Backoff, up to Retries times: send through Call only what the API treats
// idempotently (every GET, a submission with its Idempotency-Key, a
// cancel). An error answer is an *APIError.
//
// The typed methods (Submit, Status, Jobs, ...) call every route the API
// has; Call is for a caller that forwards routes it does not know, as the
// batchwork command's web console does.
func (c *Client) Call(ctx context.Context, method, path string, query url.Values, body []byte, header http.Header, out any) error {
	_, err := c.call(ctx, method, path, query, body, header, out)
	return err
}

// call is Call that also says whether a try's answer may have been lost
// after the API acted on it: a network error, or a gateway's 502 or 504
// (the API may have finished after the gateway gave up). A DELETE that
// then answers 404 may have been done by that try (DeleteJob).
func (c *Client) call(ctx context.Context, method, path string, query url.Values, body []byte, header http.Header, out any) (lost bool, err error) {
	u, err := c.url(path, query)
	if err != nil {
		return false, err
	}
	hc, sleep, agent := c.HTTP, c.sleep(), c.UserAgent
	if hc == nil {
		hc = &http.Client{CheckRedirect: noRedirects}
	}
	if agent == "" {
		agent = "batchwork-client"
	}
	var lastErr error
	for attempt := 0; attempt <= c.Retries; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, Backoff(attempt)); err != nil {
				return lost, err
			}
		}
		req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
		if err != nil {
			return lost, err
		}
		for k, vs := range header {
			req.Header[k] = vs
		}
		if body != nil && req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json")
		req.Header.Set("User-Agent", agent)
		if c.Signer != nil {
			if err := c.Signer.Sign(ctx, req, body); err != nil {
				return lost, err
			}
		}
		resp, err := hc.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return lost, ctx.Err()
			}
			lastErr, lost = c.netError(err), true
			continue
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		if err != nil {
			lastErr, lost = c.netError(err), true
			continue
		}
		switch {
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			if out == nil {
				return lost, nil
			}
			if err := json.Unmarshal(raw, out); err != nil {
				return lost, fmt.Errorf("decode the answer of %s %s: %w", method, path, err)
			}
			return lost, nil
		case resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusGatewayTimeout:
			lastErr, lost = decodeAPIError(resp.StatusCode, raw), true
			continue
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
			lastErr = decodeAPIError(resp.StatusCode, raw)
			continue
		}
		e := decodeAPIError(resp.StatusCode, raw)
		if e.Status == http.StatusUnauthorized && c.AuthHint != "" {
			e.Message += " (" + c.AuthHint + ")"
		}
		return lost, e
	}
	return lost, lastErr
}

// url is the Endpoint with the escaped path appended and query. Path is
// set from it unescaped and RawPath to it, so an escaped '/' in an id
// stays escaped and a '%' is not escaped a second time.
func (c *Client) url(path string, query url.Values) (url.URL, error) {
	u := *c.Endpoint
	raw := strings.TrimSuffix(u.EscapedPath(), "/") + path
	p, err := url.PathUnescape(raw)
	if err != nil {
		return url.URL{}, fmt.Errorf("path %q: %w", raw, err)
	}
	u.Path, u.RawPath, u.RawQuery = p, raw, query.Encode()
	return u, nil
}

func (c *Client) sleep() func(context.Context, time.Duration) error {
	if c.Sleep == nil {
		return Sleep
	}
	return c.Sleep
}

func (c *Client) netError(err error) *NetError {
	return &NetError{Err: err, Endpoint: c.Endpoint.String(), Hint: c.NetHint}
}

func decodeAPIError(status int, raw []byte) *APIError {
	e := &APIError{Status: status}
	if err := json.Unmarshal(raw, e); err != nil || e.Message == "" {
		// Not the API's error (a gateway's, a proxy's): say what came back.
		msg := strings.TrimSpace(string(raw))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		e.Code, e.Message = "http_"+fmt.Sprint(status), fmt.Sprintf("%s: %s", http.StatusText(status), msg)
	}
	return e
}

// Backoff is the wait before the given try (1 for the first retry): 200
// ms, doubling.
func Backoff(attempt int) time.Duration {
	return time.Duration(200<<(attempt-1)) * time.Millisecond
}

// Sleep waits d, or until ctx ends (then it returns ctx's error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// noRedirects keeps requests where the caller sent them: a redirect would
// carry the owner header, a session token and the body to wherever the
// server names, https or not. The API never redirects.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// IsLoopback reports whether the endpoint is on this machine: there the
// local runner is, and it takes the owner header instead of signatures.
func IsLoopback(u *url.URL) bool {
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// RegionOfHost reads the region of "<api>.execute-api.<region>.amazonaws.com"
// ("" for any other host).
func RegionOfHost(host string) string {
	parts := strings.Split(host, ".")
	for i := 0; i+2 < len(parts); i++ {
		if parts[i] == "execute-api" {
			return parts[i+1]
		}
	}
	return ""
}
