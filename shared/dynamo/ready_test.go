package dynamo

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
)

func TestReadyMarkerFor(t *testing.T) {
	t.Parallel()
	due := time.UnixMilli(1_800_000_000_000)
	tasks := func(job string, stage int, ps ...int) []domain.Task {
		var ts []domain.Task
		for _, p := range ps {
			ts = append(ts, domain.Task{Ref: domain.TaskRef{Job: job, Stage: stage, Partition: p}})
		}
		return ts
	}
	cases := []struct {
		name   string
		tasks  []domain.Task
		due    time.Time
		pk, sk string // "" for no marker
	}{
		{"a chunk", tasks("j1", 2, 198, 199, 200, 201), due, "RDY#j1#2#1", "000198#000202"},
		{"one task goes in the index itself", tasks("j1", 0, 5), due, "", ""},
		{"tasks of two stages", append(tasks("j1", 0, 1, 2), tasks("j1", 1, 3)...), due, "", ""},
		{"tasks of two jobs", append(tasks("j1", 0, 1, 2), tasks("j2", 0, 3)...), due, "", ""},
		{"no due time", tasks("j1", 0, 1, 2), time.Time{}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := readyMarkerFor(c.tasks, c.due)
			if c.pk == "" {
				if m != nil {
					t.Fatalf("marker %v, want none", m)
				}
				return
			}
			if getS(m, attrPK) != c.pk || getS(m, attrSK) != c.sk || getS(m, attrGPK) == "" || !getT(m, attrDue).Equal(due) {
				t.Fatalf("marker %s/%s gpk %q due %v, want %s/%s in the index at %v", getS(m, attrPK), getS(m, attrSK), getS(m, attrGPK), getT(m, attrDue), c.pk, c.sk, due)
			}
			// As the index returns it (keys only), it parses back.
			got, ok := parseReadyMarker(map[string]types.AttributeValue{attrPK: m[attrPK], attrSK: m[attrSK], attrGPK: m[attrGPK], attrDue: m[attrDue]})
			if !ok || got.malformed || got.job != c.tasks[0].Ref.Job || got.stage != c.tasks[0].Ref.Stage ||
				got.lo != c.tasks[0].Ref.Partition || got.hi != c.tasks[len(c.tasks)-1].Ref.Partition+1 {
				t.Fatalf("parsed %+v (ok %v)", got, ok)
			}
		})
	}
}

func TestParseReadyMarkerKeys(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pk, sk            string
		marker, malformed bool
	}{
		{"RDY#j1#0#3", "000300#000399", true, false},
		{"TASK#j1#0#3", "000300", false, false},
		{"RDY#j1#x#3", "000300#000399", true, true},
		{"RDY#j1#0#3", "000300", true, true},
		{"RDY#j1#0#3", "000399#000300", true, true},
	}
	for _, c := range cases {
		m, ok := parseReadyMarker(map[string]types.AttributeValue{attrPK: sv(c.pk), attrSK: sv(c.sk)})
		if ok != c.marker || ok && m.malformed != c.malformed {
			t.Errorf("%s/%s: marker %v malformed %v, want %v %v", c.pk, c.sk, ok, m.malformed, c.marker, c.malformed)
		}
	}
}
