package control

import (
	"context"
	"errors"
	"sync"

	"github.com/batchwork/batchwork/shared/control/admission"
	"github.com/batchwork/batchwork/shared/control/schedules"
	"github.com/batchwork/batchwork/shared/control/stages"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
)

// Schedules and their firings live in schedules; these names keep their
// callers' spelling.
type (
	ScheduleView = schedules.ScheduleView
	ScheduleList = schedules.ScheduleList
	ScheduleRun  = schedules.ScheduleRun
	RunList      = schedules.RunList
	FireCounts   = schedules.FireCounts
	TimerOutcome = schedules.TimerOutcome
)

// What FireTimer did with a message (schedules.TimerOutcome).
const (
	TimerFired        = schedules.TimerFired
	TimerAlreadyFired = schedules.TimerAlreadyFired
	TimerDropped      = schedules.TimerDropped
	TimerHandedBack   = schedules.TimerHandedBack
)

// TimerWindow is how far ahead the sweep hands firings off.
const TimerWindow = schedules.TimerWindow

var (
	// ScheduleIDPattern is the form of a schedule id.
	ScheduleIDPattern = schedules.ScheduleIDPattern
	// ErrNotTimer: a message is not a timer message.
	ErrNotTimer = schedules.ErrNotTimer
)

// NewScheduleID returns a schedule id that sorts by creation time.
func NewScheduleID() string { return schedules.NewScheduleID() }

// FireTimers handles a batch of timer queue messages at once, so one
// message's wait does not delay another, and returns each one's error
// (nil: done with, delete it; ErrNotTimer: never valid, delete it too).
func (s *Service) FireTimers(ctx context.Context, bodies []string) []error {
	errs := make([]error, len(bodies))
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.timerMessage(ctx, body) // a firing, or a relay (stages/relay.go)
		}()
	}
	wg.Wait()
	return errs
}

// firingAdmission is what the schedules ask of admission, answered by
// admission's submit and checks, and the service's cancel.
type firingAdmission struct{ s *Service }

var _ schedules.Admission = firingAdmission{}

var _ schedules.Store = Store(nil)

var _ schedules.Queue = Queue(nil)

func (a firingAdmission) CheckOwner(owner string) error { return admission.CheckOwner(owner) }

func (a firingAdmission) CheckScheduleSpec(ctx context.Context, owner string, sp *spec.Job) error {
	return a.s.Admitter.CheckScheduleSpec(ctx, owner, sp)
}

func (a firingAdmission) SubmitFiring(ctx context.Context, f schedules.Firing) (schedules.Submitted, error) {
	guard := f.Guard
	res, created, err := a.s.Admitter.SubmitFiring(ctx, SubmitRequest{Owner: f.Owner, IdempotencyKey: f.IdempotencyKey, Spec: f.Spec, Params: f.Params}, &guard)
	return schedules.Submitted{JobID: res.JobID, Created: res.Created, CreatedAt: created}, err
}

func (a firingAdmission) CancelPrevious(ctx context.Context, owner, job string) error {
	if _, err := a.s.Cancel(ctx, owner, job); err != nil && !errors.Is(err, ErrJobEnded) && !errors.Is(err, domain.ErrNotFound) {
		return err
	}
	return nil
}

func (a firingAdmission) StartJob(ctx context.Context, e dynamo.IndexEntry, job *domain.Job) (schedules.StartOutcome, error) {
	return a.s.Admitter.StartJob(ctx, e, job)
}

// timerMessage handles one message of the timer queue: a relay or
// a handed-off firing (FireTimer).
func (s *Service) timerMessage(ctx context.Context, body string) error {
	if r, ok := stages.ParseRelay(body); ok {
		return s.MaterializeRelay(ctx, r)
	}
	_, err := s.FireTimer(ctx, body)
	return err
}
