package check

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
)

// Dynamic splitting. A running input task of a dynamicSplit stage gives
// the unread rest of its byte range away as new tasks of its stage: the
// giver's range shrinks and the new tasks' ranges cover what it gave, in
// one transaction. However the stage was split, its tasks' ranges must
// tile each input object exactly once: no byte read by two tasks (a
// record twice in the outputs) and none by no task (a record lost). And
// since the runs split at different places, their outputs are compared
// through the sinks as a whole, not task by task: the same lines,
// whichever tasks wrote them, and the input's lines, each once.

// splitKind is the timeline kind of a dynamic split (re-declared from
// shared/dynamo/dynsplit.go).
const splitKind = "split"

// tiling checks that the input tasks of a dynamic-split job's stages tile
// its input objects, and counts the splits recorded.
func (c *checker) tiling(ctx context.Context, rec *jobRec) error {
	if c.cur.SplitInput == "" {
		return nil
	}
	sizes := map[string]int64{}
	keys, err := c.chaosS3.list(ctx, c.cur.SplitInput)
	if err != nil {
		return err
	}
	objs, err := c.chaosS3.fetchAll(ctx, keys)
	if err != nil {
		return err
	}
	for k, b := range objs {
		sizes[k] = int64(len(b))
	}
	for _, st := range rec.sortedStages() {
		c.res.Splits += st.Splits
		if !st.Materialized {
			continue // its tasks are still being written
		}
		byKey := map[string][]byteRange{}
		for _, t := range st.Tasks {
			if t.Input != nil {
				byKey[t.Input.Key] = append(byKey[t.Input.Key], *t.Input)
			}
		}
		if len(byKey) == 0 {
			continue
		}
		for k := range byKey {
			if _, ok := sizes[k]; !ok {
				c.fail("stage %s has tasks reading %s, not an object under %s", st.Name, k, c.cur.SplitInput)
			}
		}
		for _, k := range keys {
			if problem := tiles(byKey[k], sizes[k]); problem != "" {
				c.fail("stage %s: the tasks' byte ranges of %s (%d bytes) %s", st.Name, k, sizes[k], problem)
				continue
			}
			c.res.TiledObjects++
		}
	}
	return nil
}

// tiles says how ranges fail to cover [0, size) exactly once; "" when
// they do.
func tiles(rs []byteRange, size int64) string {
	slices.SortFunc(rs, func(a, b byteRange) int { return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End)) })
	next := int64(0)
	for _, r := range rs {
		switch {
		case r.End <= r.Start:
			return fmt.Sprintf("include the empty range [%d, %d)", r.Start, r.End)
		case r.Start < next:
			return fmt.Sprintf("overlap: [%d, %d) starts before %d, where the range before it ends", r.Start, r.End, next)
		case r.Start > next:
			return fmt.Sprintf("leave [%d, %d) unread", next, r.Start)
		}
		next = r.End
	}
	if next != size {
		return fmt.Sprintf("end at %d, not at the object's end", next)
	}
	return ""
}

// compareSinks checks the manifest at key lists exactly the committed
// outputs of stages, as compare does, and that together they hold the
// same lines as the fault-free run's (manifest refKey) and as the job's
// input: each record once, whichever task read it.
func (c *checker) compareSinks(ctx context.Context, rec, refRec *jobRec, key, refKey string, stages []int, norm func([]byte) []byte) error {
	got, want, ok := c.manifests(ctx, key, refKey)
	if !ok {
		return nil
	}
	var keys, refKeys []string
	for _, k := range c.manifestSlots(rec, key, got, stages) {
		keys = append(keys, k)
	}
	for _, o := range want.Outputs {
		refKeys = append(refKeys, o.Key)
	}
	mine, err := c.chaosS3.fetchAll(ctx, keys)
	if err != nil {
		c.fail("read outputs: %v", err)
		return nil
	}
	theirs, err := c.refS3.fetchAll(ctx, refKeys)
	if err != nil {
		return fmt.Errorf("read the fault-free run's outputs: %w", err)
	}
	inKeys, err := c.chaosS3.list(ctx, c.cur.SplitInput)
	if err != nil {
		return err
	}
	input, err := c.chaosS3.fetchAll(ctx, inKeys)
	if err != nil {
		return err
	}
	for _, k := range keys {
		c.verify(rec, k, mine[k])
	}
	c.res.Compared += len(keys)
	a, b, in := allLines(mine, norm), allLines(theirs, norm), allLines(input, norm)
	if !bytes.Equal(a, b) {
		c.fail("the outputs of %s (%d outputs, %d bytes) hold other lines than the fault-free run's %s (%d outputs, %d bytes)", key, len(keys), len(a), refKey, len(refKeys), len(b))
	}
	if !bytes.Equal(a, in) {
		c.fail("the outputs of %s (%d bytes) hold other lines than the input under %s (%d bytes): records lost or repeated", key, len(a), c.cur.SplitInput, len(in))
	}
	return nil
}

// allLines is the lines of objects, each ended by a newline, sorted.
func allLines(objects map[string][]byte, norm func([]byte) []byte) []byte {
	var lines [][]byte
	for _, b := range objects {
		if norm != nil {
			b = norm(b)
		}
		for len(b) > 0 {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				lines = append(lines, append(bytes.Clone(b), '\n'))
				break
			}
			lines = append(lines, b[:i+1])
			b = b[i+1:]
		}
	}
	slices.SortFunc(lines, bytes.Compare)
	return bytes.Join(lines, nil)
}
