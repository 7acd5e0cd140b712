package provision

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/infra/template"
	"github.com/batchwork/batchwork/shared/spec"
)

// A local data plane told to run sizes gets a copy of the normal ready
// queue for each size beyond the default, with the output a deployed
// stack names it by; told none, it is the template's as it was.
func TestWithSizedQueues(t *testing.T) {
	body, err := DataPlane(template.JSON)
	if err != nil {
		t.Fatal(err)
	}
	same, err := withSizedQueues(body, nil)
	if err != nil || string(same) != string(body) {
		t.Fatalf("without sizes: changed (%v)", err)
	}
	got, err := withSizedQueues(body, []spec.Size{1 << 30, 2 << 30, 8 << 30})
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Resources map[string]map[string]any
		Outputs   map[string]map[string]any
	}
	if err := json.Unmarshal(got, &tmpl); err != nil {
		t.Fatal(err)
	}
	normalID := tmpl.Outputs[template.OutQueueNormal]["Value"].(map[string]any)["Ref"].(string)
	for _, size := range []string{"2GiB", "8GiB"} {
		out, ok := tmpl.Outputs[template.OutQueueSized(size)]
		if !ok {
			t.Fatalf("no output %s: %v", template.OutQueueSized(size), tmpl.Outputs)
		}
		id := out["Value"].(map[string]any)["Ref"].(string)
		if id == normalID || !cmp.Equal(tmpl.Resources[id], tmpl.Resources[normalID]) {
			t.Errorf("%s queue %s: %v, want a copy of the normal queue %v", size, id, tmpl.Resources[id], tmpl.Resources[normalID])
		}
	}
	for _, size := range []string{"1GiB", "4GiB", "10GiB"} {
		if _, ok := tmpl.Outputs[template.OutQueueSized(size)]; ok {
			t.Errorf("a %s queue it was not told to run", size)
		}
	}
	got2, err := withSizedQueues(got, []spec.Size{2 << 30})
	if err != nil || string(got2) != string(got) {
		t.Errorf("a template with the queue already: changed (%v)", err)
	}
	if q := sizedQueues(map[string]string{template.OutQueueSized("2GiB"): "u2", template.OutQueueNormal: "n"}); !cmp.Equal(q, map[spec.Size]string{2 << 30: "u2"}) {
		t.Errorf("sizedQueues = %v, want 2GiB: u2", q)
	}
}
