package provision

// The ready queues of executor sizes (control.Queues.Sized). A stack
// deployed with the construct's ExecutorSizes has one per size beyond the
// default, named by the output template.OutQueueSized. The default
// template has none, so a local installation told to run sizes
// (Settings.ExecutorSizes) gets them as copies of the template's
// normal-priority ready queue (same visibility, same dead-letter queue),
// under the same output keys: the control plane then routes a task to its
// size's queue as on AWS, and the emulator tests run that routing.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/batchwork/batchwork/infra/template"
	"github.com/batchwork/batchwork/shared/spec"
)

// sizeName spells a size as the construct's outputs do: 4GiB.
func sizeName(z spec.Size) string { return strconv.FormatInt(int64(z)>>30, 10) + "GiB" }

// sizedOutputs are the output keys of every size's queue, by size.
func sizedOutputs() map[spec.Size]string {
	out := map[spec.Size]string{}
	for _, z := range spec.ExecutorSizes {
		if z != spec.DefaultExecutorSize {
			out[z] = template.OutQueueSized(sizeName(z))
		}
	}
	return out
}

// withSizedQueues adds to a data-plane template (DataPlane's) a copy of
// its normal ready queue for each size beyond the default, with its
// output, unless the template has that output already.
func withSizedQueues(body []byte, sizes []spec.Size) ([]byte, error) {
	var t map[string]any
	if err := json.Unmarshal(body, &t); err != nil {
		return nil, fmt.Errorf("parse data plane: %w", err)
	}
	res, _ := t["Resources"].(map[string]any)
	outs, _ := t["Outputs"].(map[string]any)
	if res == nil || outs == nil {
		return nil, fmt.Errorf("data plane: no resources or outputs")
	}
	normal, _ := outs[template.OutQueueNormal].(map[string]any)
	value, _ := normal["Value"].(map[string]any)
	id, _ := value["Ref"].(string)
	if id == "" || res[id] == nil {
		return nil, fmt.Errorf("data plane: output %s names no queue", template.OutQueueNormal)
	}
	changed := false
	for _, z := range sizes {
		key, ok := sizedOutputs()[z]
		if !ok || outs[key] != nil {
			continue
		}
		copyID := id + "Sized" + sizeName(z)
		raw, err := json.Marshal(res[id])
		if err != nil {
			return nil, err
		}
		var q any
		if err := json.Unmarshal(raw, &q); err != nil {
			return nil, err
		}
		res[copyID] = q
		outs[key] = map[string]any{"Value": map[string]any{"Ref": copyID}}
		changed = true
	}
	if !changed {
		return body, nil
	}
	return json.Marshal(t)
}

// sizedQueues reads the sized queues' URLs from a stack's outputs (got,
// by key); nil when it has none.
func sizedQueues(got map[string]string) map[spec.Size]string {
	var out map[spec.Size]string
	sizes := make([]spec.Size, 0, len(sizedOutputs()))
	for z := range sizedOutputs() {
		sizes = append(sizes, z)
	}
	slices.Sort(sizes)
	for _, z := range sizes {
		if url := got[sizedOutputs()[z]]; url != "" {
			if out == nil {
				out = map[spec.Size]string{}
			}
			out[z] = url
		}
	}
	return out
}
