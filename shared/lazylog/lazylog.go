// Package lazylog defers a logger's With until something is logged.
//
// slog's JSON handler formats the attributes of Logger.With when it is
// called; the executor and the control plane make a logger per task (its
// job, stage, partition, executor) and most tasks log nothing, so the
// formatting was 2 to 3% of the bench process's CPU. A handler wrapped
// here keeps the attributes and groups in order and hands them to the
// wrapped handler, once per derived logger, the first time it logs.
package lazylog

import (
	"context"
	"log/slog"
	"sync"
)

// op is one WithAttrs, WithGroup or WithFunc, in the order they were
// called.
type op struct {
	attrs []slog.Attr
	fn    func() []slog.Attr // WithFunc's: the attributes, made at the first line
	group string
}

type handler struct {
	base slog.Handler
	ops  []op

	once sync.Once
	made slog.Handler
}

// Wrap returns h with its With and WithGroup deferred.
func Wrap(h slog.Handler) slog.Handler {
	if l, ok := h.(*handler); ok {
		return l
	}
	return &handler{base: h}
}

// New is slog.New over Wrap(h).
func New(h slog.Handler) *slog.Logger { return slog.New(Wrap(h)) }

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.base.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error { return h.handler().Handle(ctx, r) }

// handler is the wrapped handler with every deferred op applied, built
// once.
func (h *handler) handler() slog.Handler {
	h.once.Do(func() {
		made := h.base
		// The attributes of consecutive Withs go to the handler in one
		// WithAttrs (a handler's WithAttrs adds to what it has, so the
		// bytes are the same): the JSON handler copies its state per call,
		// and a task's logger is made of two or three Withs.
		var attrs []slog.Attr
		for _, o := range h.ops {
			if o.fn != nil {
				attrs = append(attrs, o.fn()...)
				continue
			}
			if o.group == "" {
				attrs = append(attrs, o.attrs...)
				continue
			}
			if len(attrs) > 0 {
				made, attrs = made.WithAttrs(attrs), nil
			}
			made = made.WithGroup(o.group)
		}
		if len(attrs) > 0 {
			made = made.WithAttrs(attrs)
		}
		h.made = made
	})
	return h.made
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return h.with(op{attrs: attrs})
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.with(op{group: name})
}

// WithFunc is slog.New(Wrap(h)).With(attrs()...) with attrs called only
// when the logger, or one derived from it, first writes a line (once for
// each of them that writes): a logger made per task message takes a
// closure, not its attributes' slice and the values they format (a task
// id's string), for the tasks that log nothing. attrs must be safe to
// call from any goroutine, and more than once, with no side effects.
func WithFunc(h slog.Handler, attrs func() []slog.Attr) *slog.Logger {
	return slog.New(Wrap(h).(*handler).with(op{fn: attrs}))
}

func (h *handler) with(o op) *handler {
	ops := make([]op, len(h.ops)+1)
	copy(ops, h.ops)
	ops[len(h.ops)] = o
	return &handler{base: h.base, ops: ops}
}
