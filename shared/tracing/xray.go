package tracing

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// XRayIDs is an id generator whose trace ids AWS X-Ray accepts: the first
// four bytes are the trace's start in epoch seconds, the other twelve
// random (as go.opentelemetry.io/contrib/propagators/aws/xray's
// IDGenerator makes them, without its module). An OTLP collector or the
// ADOT collector forwards such traces to X-Ray unchanged.
func XRayIDs() sdktrace.IDGenerator { return newXRayIDs(time.Now) }

func newXRayIDs(now func() time.Time) *xrayIDs {
	var seed [16]byte
	_, _ = crand.Read(seed[:])
	return &xrayIDs{now: now, rnd: rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))}
}

type xrayIDs struct {
	now func() time.Time
	mu  sync.Mutex
	rnd *rand.Rand
}

func (g *xrayIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	binary.BigEndian.PutUint32(tid[:4], uint32(g.now().Unix()))
	g.mu.Lock()
	defer g.mu.Unlock()
	for [12]byte(tid[4:]) == [12]byte{} {
		binary.BigEndian.PutUint32(tid[4:8], g.rnd.Uint32())
		binary.BigEndian.PutUint64(tid[8:], g.rnd.Uint64())
	}
	return tid, g.spanID()
}

func (g *xrayIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.spanID()
}

func (g *xrayIDs) spanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], g.rnd.Uint64())
	}
	return sid
}
