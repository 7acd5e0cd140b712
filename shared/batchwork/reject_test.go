package batchwork_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/batchwork"
)

// rejectNonJSON rejects every line of its input that is not JSON.
func rejectNonJSON(ctx context.Context, t *batchwork.Task) error {
	sc := bufio.NewScanner(t.Input)
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			if err := t.Reject(sc.Bytes(), "not JSON"); err != nil {
				return err
			}
			continue
		}
		if _, err := t.Out.Write(append(sc.Bytes(), '\n')); err != nil {
			return err
		}
	}
	return sc.Err()
}

func TestRejectUnderRunTask(t *testing.T) {
	const input = "{\"a\":1}\nbad one\n{\"a\":2}\nbad one\r\nbad two"
	cases := []struct {
		name    string
		max     int
		wantErr bool
		offsets []int64
	}{
		{name: "within the limit", max: 5, offsets: []int64{8, 24, 33}},
		{name: "exactly the limit", max: 3, offsets: []int64{8, 24, 33}},
		{name: "past the limit", max: 2, wantErr: true, offsets: []int64{8, 24, 33}},
		{name: "no limit set: none allowed", max: 0, wantErr: true, offsets: []int64{8}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := batchwork.RunTask(context.Background(), rejectNonJSON, batchwork.TaskInput{
				Stage: "parse", Partition: 3, Input: strings.NewReader(input), MaxBadRecords: tc.max,
			})
			if tc.wantErr != (err != nil) {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if err != nil && (!errors.Is(err, batchwork.ErrTooManyBadRecords) || !batchwork.IsPermanent(err)) {
				t.Fatalf("err = %v, want ErrTooManyBadRecords, permanent", err)
			}
			var got []int64
			for _, r := range res.BadRecords {
				if r.Stage != "parse" || r.Partition != 3 || r.Attempt != 1 || r.Reason != "not JSON" || !strings.HasPrefix(r.Record, "bad ") {
					t.Errorf("bad record %+v", r)
				}
				got = append(got, r.Offset)
			}
			if len(got) != len(tc.offsets) {
				t.Fatalf("offsets %v, want %v", got, tc.offsets)
			}
			for i := range got {
				if got[i] != tc.offsets[i] {
					t.Fatalf("offsets %v, want %v", got, tc.offsets)
				}
				// The offset is where the record starts in the input.
				if rec := res.BadRecords[i].Record; !strings.HasPrefix(input[got[i]:], rec) {
					t.Errorf("input at offset %d is %q, not the record %q", got[i], input[got[i]:], rec)
				}
			}
		})
	}
}

func TestRejectBounds(t *testing.T) {
	long := strings.Repeat("x", 3*batchwork.MaxBadRecordBytes)
	fn := func(ctx context.Context, t *batchwork.Task) error {
		if _, err := io.ReadAll(t.Input); err != nil {
			return err
		}
		if err := t.Reject([]byte(long), strings.Repeat("why ", 500)); err != nil {
			return err
		}
		if err := t.RejectAt(42, []byte("changed"), ""); err != nil {
			return err
		}
		return t.Reject([]byte("not in the input"), "gone")
	}
	res, err := batchwork.RunTask(context.Background(), fn, batchwork.TaskInput{Input: strings.NewReader(long + "\n"), MaxBadRecords: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.BadRecords) != 3 {
		t.Fatalf("%d bad records, want 3", len(res.BadRecords))
	}
	r := res.BadRecords[0]
	if r.Offset != 0 || !strings.HasSuffix(r.Record, "…[truncated: 3072 bytes]") || len(r.Record) > batchwork.MaxBadRecordBytes+40 ||
		len(r.Reason) > batchwork.MaxBadReasonBytes+40 {
		t.Errorf("long record: offset %d, record %d bytes ending %q, reason %d bytes", r.Offset, len(r.Record), r.Record[len(r.Record)-30:], len(r.Reason))
	}
	if r := res.BadRecords[1]; r.Offset != 42 || r.Reason != "(no reason given)" {
		t.Errorf("RejectAt: %+v", r)
	}
	if r := res.BadRecords[2]; r.Offset != -1 {
		t.Errorf("a record not in the input: offset %d, want -1", r.Offset)
	}
}
