package provision

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/infra/template"
)

// TestDataPlaneOfTheDefaultTemplate: the local data plane is exactly the
// template's resources of the data-plane types, and the outputs a
// Resources is read from survive.
func TestDataPlaneOfTheDefaultTemplate(t *testing.T) {
	sub, err := DataPlane(template.JSON)
	if err != nil {
		t.Fatal(err)
	}
	var full, got struct {
		Resources map[string]struct{ Type string }
		Outputs   map[string]any
	}
	if err := json.Unmarshal(template.JSON, &full); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(sub, &got); err != nil {
		t.Fatal(err)
	}
	var want, have []string
	for id, r := range full.Resources {
		if DataPlaneTypes[r.Type] {
			want = append(want, id)
		}
	}
	for id := range got.Resources {
		have = append(have, id)
	}
	sort.Strings(want)
	sort.Strings(have)
	if diff := cmp.Diff(want, have); diff != "" {
		t.Errorf("data-plane resources (-want +got):\n%s", diff)
	}
	if len(have) < 6 {
		t.Errorf("only %d data-plane resources: %v", len(have), have)
	}
	for _, k := range resourceOutputs {
		if _, ok := got.Outputs[k]; !ok {
			t.Errorf("output %s missing from the data plane", k)
		}
	}
	if _, ok := got.Outputs[template.OutAPI]; ok {
		t.Errorf("output %s refers to the API, which is not deployed locally", template.OutAPI)
	}
}

func TestDataPlaneErrors(t *testing.T) {
	cases := []struct {
		name, template, want string
	}{
		{"not json", `{`, "parse template"},
		{"no data plane", `{"Resources":{"F":{"Type":"AWS::Lambda::Function"}}}`, "no data-plane resources"},
		{"refers outside", `{"Resources":{"Q":{"Type":"AWS::SQS::Queue","Properties":{"KmsMasterKeyId":{"Fn::GetAtt":["Key","Arn"]}}},"Key":{"Type":"AWS::KMS::Key"}}}`,
			"Q refers to Key, which is not a data-plane resource"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DataPlane([]byte(c.template))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestRefs(t *testing.T) {
	got := refs(json.RawMessage(`{"a":{"Ref":"X"},"b":[{"Fn::GetAtt":["Y","Arn"]}],"c":{"Fn::Sub":"arn:${AWS::Partition}:${Z.Arn}/x"},"d":{"Fn::Sub":["${W}",{}]}}`))
	if diff := cmp.Diff([]string{"AWS::Partition", "W", "X", "Y", "Z"}, got); diff != "" {
		t.Fatalf("refs (-want +got):\n%s", diff)
	}
}
