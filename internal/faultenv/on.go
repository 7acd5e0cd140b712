//go:build faults

package faultenv

import (
	"context"
	"time"

	"github.com/batchwork/batchwork/internal/faults"
)

// FromEnv returns the injector BATCHWORK_FAULTS and BATCHWORK_FAULTS_SEED
// describe, or one that injects nothing when BATCHWORK_FAULTS is unset,
// empty or "off".
func FromEnv() (Injector, error) {
	inj, err := faults.FromEnv()
	if err != nil {
		return nil, err
	}
	if inj == nil {
		return none{}, nil
	}
	return injector{inj}, nil
}

type injector struct{ *faults.Injector }

func (i injector) ReportEvery(ctx context.Context, period time.Duration, report func(map[string]int)) {
	faults.ReportEvery(ctx, i.Injector, period, report)
}
