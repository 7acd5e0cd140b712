//go:build unix

package execstage

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/domain"
)

// TestParseCheckpointLine: a checkpoint line's fields parse, and a bad
// one is refused with an error naming the field and the problem.
func TestParseCheckpointLine(t *testing.T) {
	t.Parallel()
	big := base64.StdEncoding.EncodeToString(make([]byte, domain.MaxCheckpointState+1))
	tests := []struct {
		rest      string
		wantOff   int64
		wantState string
		wantErr   string
	}{
		{rest: "0\t", wantOff: 0},
		{rest: "1234\t" + base64.StdEncoding.EncodeToString([]byte("n=7")), wantOff: 1234, wantState: "n=7"},
		{rest: "1234", wantErr: `no tab after the offset "1234"`},
		{rest: "", wantErr: "no tab after the offset"},
		{rest: "12a\t", wantErr: `offset "12a" is not a whole number of bytes`},
		{rest: " 12\t", wantErr: `offset " 12" is not a whole number of bytes`},
		{rest: "99999999999999999999\t", wantErr: "is not a whole number of bytes"},
		{rest: "-1\t", wantErr: "offset -1 is negative"},
		{rest: "5\tnot base64!", wantErr: "state is not standard base64"},
		{rest: "5\taGk", wantErr: "state is not standard base64"}, // unpadded
		{rest: "5\taGk=\textra", wantErr: "state has a tab"},
		{rest: "5\t" + big, wantErr: "over the 65536-byte limit"},
	}
	for _, tt := range tests {
		off, state, err := parseCheckpointLine(tt.rest)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, domain.ErrCheckpoint) {
				t.Errorf("%.40q: error %v, want a checkpoint refusal containing %q", tt.rest, err, tt.wantErr)
			}
			continue
		}
		if err != nil || off != tt.wantOff || string(state) != tt.wantState {
			t.Errorf("%.40q: %d %q %v, want %d %q", tt.rest, off, state, err, tt.wantOff, tt.wantState)
		}
	}
}

// TestExecCheckpointLineRefused: a malformed checkpoint line on the
// control channel (fd 3) is answered on fd 4 with an error naming the
// problem (the program decides what to do) and does not stop the program;
// a line cut for its length is refused, not parsed short.
func TestExecCheckpointLineRefused(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("A", maxCheckpointLine)
	dir := testdouble.Programs(t, map[string]string{"prog": `
[ "$BATCHWORK_CONTROL_FD" = 3 ] && [ "$BATCHWORK_CHECKPOINT_FD" = 4 ] || echo "fds $BATCHWORK_CONTROL_FD $BATCHWORK_CHECKPOINT_FD"
printf 'BATCHWORK_CHECKPOINT\tlots\t\n' >&3
read -r ack <&4; echo "$ack"
printf 'BATCHWORK_CHECKPOINT\t5\t` + long + `\n' >&3
read -r ack <&4; echo "$ack"
echo done
`})
	prog, err := New(dir, mustSpec(t, execOne).Stages[0], Limits{})
	if err != nil {
		t.Fatal(err)
	}
	h := &logRecords{}
	out := &memOut{}
	task := &Attempt{Out: out, Log: slog.New(h), Checkpoints: noCheckpoints{t}}
	if err := prog.Run(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	got := string(out.part())
	want := []string{
		`error checkpoint refused: checkpoint line: offset "lots" is not a whole number of bytes`,
		"error checkpoint refused: checkpoint line: longer than",
		"done",
	}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("stdout %q, want %d lines", got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("ack %d = %q, want %q...", i, lines[i], w)
		}
	}
}

// TestStdoutPumpSync: a sync returns once everything written to stdout
// before it is in the sink, the marker never reaches the outputs, also
// when a read cuts it in two, and what comes after it follows.
func TestStdoutPumpSync(t *testing.T) {
	t.Parallel()
	for _, before := range []int{0, 10, 32<<10 - 5, 32 << 10, 40 << 10} {
		out := &memOut{}
		sink := &stdoutSink{out: out, stop: func(error) {}}
		p, err := newStdoutPump(sink)
		if err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte("0123456789abcdef\n"), before/17+1)[:before]
		if _, err := p.w.Write(data); err != nil {
			t.Fatal(err)
		}
		// As sync does, but with the marker in the pipe before the pump's
		// first read, so that a read of 32 KiB cuts it where the case says.
		p.pending = true
		if _, err := p.w.Write(p.tok); err != nil {
			t.Fatal(err)
		}
		go p.run()
		select {
		case err := <-p.synced:
			if err != nil {
				t.Fatalf("%d bytes before: sync: %v", before, err)
			}
		case <-time.After(10 * time.Second): // a bound on a failure, not synchronisation
			t.Fatalf("%d bytes before: the marker never came through", before)
		}
		if got := out.part(); !bytes.Equal(got, data) {
			t.Fatalf("%d bytes before: sink has %d bytes at the sync, want %d", before, len(got), len(data))
		}
		if _, err := p.w.Write([]byte("after\n")); err != nil {
			t.Fatal(err)
		}
		if !p.finish(execWaitDelay) {
			t.Fatal("pump did not end")
		}
		if got, want := out.part(), append(bytes.Clone(data), "after\n"...); !bytes.Equal(got, want) {
			t.Fatalf("%d bytes before: outputs %d bytes, want %d (marker kept?)", before, len(got), len(want))
		}
		if bytes.Contains(out.part(), []byte("BATCHWORK-SYNC")) {
			t.Fatal("marker in the outputs")
		}
	}
}
