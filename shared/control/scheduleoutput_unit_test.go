package control

import (
	"errors"
	"testing"

	"github.com/batchwork/batchwork/shared/spec"
)

// A schedule's jobs may publish only to a folder named by the firing's
// slot: the escape $${params.scheduledTime} holds the placeholder's text
// but resolves to the same literal folder at every firing, so all but the
// first firing would fail on the first's output claim.
func TestScheduleOutputEscapedScheduledTimeRefused(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	for _, tt := range []struct {
		output string
		ok     bool
	}{
		{"outputs:daily/${params.scheduledTime}/", true},
		{"outputs:daily/$${params.scheduledTime}/", false},
	} {
		body := `{"name":"daily","expression":"0 2 * * *","spec":{"name":"d","stages":[{"name":"s","task":"work","partitions":{"count":1}}],` +
			`"output":"` + tt.output + `"}}`
		_, err := r.svc.CreateSchedule(r.ctx, "alice", []byte(body))
		var fe *spec.FieldError
		switch {
		case tt.ok && errors.As(err, &fe):
			// Past validation, the unit rig's store refuses to create.
			t.Errorf("output %s: create schedule: %v; want it valid", tt.output, err)
		case !tt.ok && (!errors.As(err, &fe) || fe.Field != "spec.output"):
			t.Errorf("output %s: create schedule: %v; want a refusal on spec.output", tt.output, err)
		}
	}
}
