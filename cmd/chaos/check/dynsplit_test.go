package check

import "testing"

// splitInput is the dynamic-split histories' input: one object of four
// lines, 12 bytes.
const (
	splitInput  = "inputs/o/split/"
	splitObject = splitInput + "part-0.txt"
)

// dynsplit makes the job's stage a dynamicSplit one whose task 0 gave
// [6, 12) of the input away to task 1, each writing the lines it read;
// the fault-free run's twin split elsewhere (it writes other outputs
// with the same lines).
func (h *history) dynsplit() {
	h.job.SplitInput = splitInput
	h.objects[splitObject] = []byte("l1\nl2\nl3\nl4\n")
	st := h.rec.Stages[0]
	st.Tasks[0].Input = &byteRange{Key: splitObject, Start: 0, End: 6}
	st.Tasks[1].Input = &byteRange{Key: splitObject, Start: 6, End: 12}
	st.Splits = 1
	h.objects[outputKey(h.rec.ID, "map", 0, 1, 0)] = []byte("l1\nl2\n")
	h.objects[outputKey(h.rec.ID, "map", 1, 1, 0)] = []byte("l3\nl4\n")
	h.refMutate = func(r *history) {
		r.objects[outputKey(r.rec.ID, "map", 0, 1, 0)] = []byte("l1\n")
		r.objects[outputKey(r.rec.ID, "map", 1, 1, 0)] = []byte("l4\nl2\nl3\n")
	}
}

// dynsplitCases are TestCheckerSeesViolations's cases of dynamic splits.
var dynsplitCases = []struct {
	name   string
	mutate func(h *history)
	want   string
}{
	{"sound dynamic split", func(h *history) { h.dynsplit() }, ""},
	{"split ranges overlap", func(h *history) {
		h.dynsplit()
		h.rec.Stages[0].Tasks[1].Input.Start = 4
	}, "overlap: [4, 12) starts before 6"},
	{"split ranges leave a gap", func(h *history) {
		h.dynsplit()
		h.rec.Stages[0].Tasks[1].Input.Start = 8
	}, "leave [6, 8) unread"},
	{"split ranges stop short of the object's end", func(h *history) {
		h.dynsplit()
		h.rec.Stages[0].Tasks[1].Input.End = 10
	}, "end at 10, not at the object's end"},
	{"a split task reads another object", func(h *history) {
		h.dynsplit()
		h.rec.Stages[0].Tasks[1].Input.Key = "inputs/o/elsewhere"
	}, "has tasks reading inputs/o/elsewhere"},
	{"split outputs differ from the fault-free run's", func(h *history) {
		h.dynsplit()
		h.objects[outputKey(h.rec.ID, "map", 1, 1, 0)] = []byte("l3\n")
	}, "hold other lines than the fault-free run's"},
	{"a split repeated a record, in both runs", func(h *history) {
		h.dynsplit()
		h.objects[outputKey(h.rec.ID, "map", 1, 1, 0)] = []byte("l2\nl3\nl4\n")
		h.refMutate = func(r *history) {
			r.objects[outputKey(r.rec.ID, "map", 1, 1, 0)] = []byte("l2\nl3\nl4\n")
		}
	}, "hold other lines than the input under inputs/o/split/ (12 bytes): records lost or repeated"},
}

// The splits recorded are counted, and each tiled object.
func TestDynsplitCounts(t *testing.T) {
	h := soundHistory("j1")
	h.dynsplit()
	c := h.checker(t)
	if err := c.job(t.Context(), h.job); err != nil {
		t.Fatal(err)
	}
	if len(c.res.Violations) > 0 || c.res.Splits != 1 || c.res.TiledObjects != 1 {
		t.Fatalf("violations %v, %d splits, %d objects tiled; want none, 1, 1", c.res.Violations, c.res.Splits, c.res.TiledObjects)
	}
}
