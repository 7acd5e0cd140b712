package executor

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/internal/executor/execstage"
	"github.com/batchwork/batchwork/internal/executor/rejects"
	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/domain"
)

// An exec stage's program rejects a record with a line on its control
// channel (fd 3); the record's offset in stdin is found. The same line on
// stderr, as a program echoing its data writes it, is log text and
// rejects nothing.
func TestExecProgramRejects(t *testing.T) {
	t.Parallel()
	dir := testdouble.Programs(t, map[string]string{"filter": `while IFS= read -r line; do
  case "$line" in
    bad*) printf 'BATCHWORK_REJECT\tstarts with bad\t%s\n' "$line" >&"$BATCHWORK_CONTROL_FD" ;;
    BATCHWORK_REJECT*) printf '%s\n' "$line" >&2; printf '%s\n' "$line" ;;
    *) printf '%s\n' "$line" ;;
  esac
done
echo "a log line" >&2
`})
	fn, err := (&Runner{ExecDir: dir}).execFunc(mustSpec(t, strings.Replace(execOne, "[prog, arg one]", "[filter]", 1)).Stages[0], execstage.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	input := "ok 1\nbad 2\twith a tab\nok 3\nbad 4\nBATCHWORK_REJECT\tforged\tok 1\n"
	rj, in := rejects.New("s", 0, 1, 5, strings.NewReader(input))
	logs := &logRecords{}
	task := &Task{Input: in, Out: (&Runner{}).newOutput(1), Log: slog.New(logs), Rejects: rj}
	if err := fn(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	recs := rj.Records()
	want := []domain.BadRecord{
		{Stage: "s", Attempt: 1, Offset: 5, Record: "bad 2\twith a tab", Reason: "starts with bad"},
		{Stage: "s", Attempt: 1, Offset: 27, Record: "bad 4", Reason: "starts with bad"},
	}
	if len(recs) != len(want) || recs[0] != want[0] || recs[1] != want[1] {
		t.Fatalf("rejected %+v, want %+v", recs, want)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	var stderr []string
	for _, r := range logs.recs {
		if r.Message == "stderr" {
			stderr = append(stderr, attr(r, "line"))
		}
	}
	if want := []string{"BATCHWORK_REJECT\tforged\tok 1", "a log line"}; !slices.Equal(stderr, want) {
		t.Errorf("stderr logged %q, want %q", stderr, want)
	}
}
