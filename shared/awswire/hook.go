package awswire

import (
	"context"
	"net/http"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Call is one operation of a lean client as a Hook sees it.
type Call struct {
	// Service is the SDK's service ID ("DynamoDB", "SQS"), as the SDK's
	// middleware names it, so that a hook and its SDK middleware share
	// their code.
	Service string
	// Operation is the API's name for it ("UpdateItem", "ReceiveMessage").
	Operation string
	// Input is the SDK's input type (*dynamodb.UpdateItemInput). A hook's
	// Call may replace it before calling next (with a value of the same
	// type: the cost meter asks for the consumed capacity so).
	Input any
	// Output is the SDK's output type, set when next returns no error.
	Output any
}

// Send sends one attempt's request.
type Send func(*http.Request) (*http.Response, error)

// Hook sees every call of the lean clients, and every attempt: fault
// injection, the cost meter, the bench's recorder, the IAM recorder and
// the request counter implement it beside their SDK middleware.
type Hook interface {
	// Call wraps one operation, its retries included: it calls next once
	// (or answers the call with an error instead).
	Call(ctx context.Context, c *Call, next func(context.Context) error) error
	// Attempt wraps one attempt's send, inside the retry loop: it may
	// answer without calling send (an injected throttle), or call it and
	// replace the answer (a lost response). An error it returns is a
	// failure to send, which the retryer treats as a connection error.
	Attempt(ctx context.Context, c *Call, req *http.Request, send Send) (*http.Response, error)
}

// hooks is the hooks an aws.Config carries for the lean clients, in the
// order they were installed (the first wraps the others). It rides in
// the config's ConfigSources, which every copy of the config shares as it
// shares APIOptions; the SDK ignores what it does not know there.
type hooks struct{ list []Hook }

// Install adds h to the hooks of the lean clients (of every service) made
// from cfg afterwards, as an SDK middleware's Install adds it to cfg's
// APIOptions. Installing the same hook twice is harmless.
func Install(cfg *aws.Config, h Hook) {
	if cfg == nil || h == nil {
		return
	}
	cur := Hooks(*cfg)
	if slices.Contains(cur, h) {
		return
	}
	next := hooks{list: append(slices.Clip(cur), h)}
	// Copied, not written in place: a copy of cfg made before keeps its
	// own hooks.
	srcs := make([]any, 0, len(cfg.ConfigSources)+1)
	for _, s := range cfg.ConfigSources {
		if _, ok := s.(hooks); !ok {
			srcs = append(srcs, s)
		}
	}
	cfg.ConfigSources = append(srcs, next)
}

// Hooks returns the hooks installed on cfg.
func Hooks(cfg aws.Config) []Hook {
	for _, s := range cfg.ConfigSources {
		if h, ok := s.(hooks); ok {
			return h.list
		}
	}
	return nil
}
