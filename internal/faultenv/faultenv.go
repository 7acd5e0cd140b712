// Package faultenv gives a binary the fault injection its environment
// asks for (BATCHWORK_FAULTS, BATCHWORK_FAULTS_SEED; see internal/faults).
// Injection is compiled in only with the build tag "faults", which the
// chaos harness builds its binaries with: the Lambda functions, the
// executors users build and the CLI carry no fault injector. A binary
// built without the tag refuses a BATCHWORK_FAULTS setting, so a chaos run
// can never run fault-free by mistake.
package faultenv

import (
	"context"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Environment variables FromEnv reads; the same names as internal/faults,
// which a default build does not link.
const (
	EnvRules = "BATCHWORK_FAULTS"
	EnvSeed  = "BATCHWORK_FAULTS_SEED"
)

// Injector is what a binary does with its fault injector.
type Injector interface {
	// Install adds injection to every client built from cfg.
	Install(cfg *aws.Config)
	// SetEnabled switches injection on or off (off while setting up).
	SetEnabled(on bool)
	// ReportEvery calls report with the cumulative counts of injected
	// faults every period until ctx ends, and once more then; a chaos
	// harness sums every process's last report. Without faults it
	// returns at once.
	ReportEvery(ctx context.Context, period time.Duration, report func(map[string]int))
}

// requested reports whether the environment asks for faults.
func requested(getenv func(string) string) bool {
	v := strings.TrimSpace(getenv(EnvRules))
	return v != "" && !strings.EqualFold(v, "off")
}

// none is the injector of a process that injects nothing.
type none struct{}

func (none) Install(*aws.Config) {}
func (none) SetEnabled(bool)     {}
func (none) ReportEvery(context.Context, time.Duration, func(map[string]int)) {
}
