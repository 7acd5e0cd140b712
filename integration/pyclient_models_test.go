package integration

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/batchwork/batchwork/shared/api"
)

// dumpModels prints each model of batchwork.models with the schema it
// follows and its fields: JSON name, and required (no default).
const dumpModels = `
import dataclasses, inspect, json
from batchwork import models as m
out = {"models": {}, "unmapped": []}
for cls, schema in m.SCHEMAS.items():
    out["models"][schema] = {"model": cls.__name__, "fields": [
        {"json": f.metadata["json"], "required": f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
        for f in dataclasses.fields(cls)]}
for name, cls in inspect.getmembers(m, dataclasses.is_dataclass):
    if cls.__module__ == m.__name__ and cls not in m.SCHEMAS:
        out["unmapped"].append(name)
print(json.dumps(out))
`

type pyModels struct {
	Models map[string]struct {
		Model  string `json:"model"`
		Fields []struct {
			JSON     string `json:"json"`
			Required bool   `json:"required"`
		} `json:"fields"`
	} `json:"models"`
	Unmapped []string `json:"unmapped"`
}

// The Python client's models follow shared/api/openapi.yaml: each has
// exactly its schema's properties, required exactly where the schema
// requires them; every object a route answers with (and every object
// declared inline in one) has a model; and no model is left unmapped.
func TestPythonModelsFollowOpenAPI(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, venvPython(t, root), "-c", dumpModels)
	cmd.Env = pythonEnv("PYTHONPATH=" + filepath.Join(root, "clients", "python", "src"))
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("dump the Python models: %v\n%s", err, stderr)
	}
	var py pyModels
	if err := json.Unmarshal(out, &py); err != nil {
		t.Fatalf("the models' dump %q: %v", out, err)
	}
	if len(py.Unmapped) > 0 {
		t.Errorf("models not in batchwork.models.SCHEMAS (so not checked against openapi.yaml): %v", py.Unmapped)
	}

	// schema resolves "Name" or "Name.prop.prop" (an object declared inline).
	schema := func(path string) *openapi3.Schema {
		parts := strings.Split(path, ".")
		ref := doc.Components.Schemas[parts[0]]
		for _, p := range parts[1:] {
			if ref == nil || ref.Value == nil {
				return nil
			}
			ref = ref.Value.Properties[p]
		}
		if ref == nil {
			return nil
		}
		return ref.Value
	}
	for path, model := range py.Models {
		s := schema(path)
		if s == nil {
			t.Errorf("%s follows %s, which openapi.yaml does not declare", model.Model, path)
			continue
		}
		var have, haveReq []string
		for _, f := range model.Fields {
			have = append(have, f.JSON)
			if f.Required {
				haveReq = append(haveReq, f.JSON)
			}
		}
		var want []string
		for name := range s.Properties {
			want = append(want, name)
		}
		wantReq := slices.Clone(s.Required)
		for _, l := range [][]string{have, haveReq, want, wantReq} {
			sort.Strings(l)
		}
		if !slices.Equal(have, want) {
			t.Errorf("%s's fields %v; %s's properties are %v", model.Model, have, path, want)
		}
		if !slices.Equal(haveReq, wantReq) {
			t.Errorf("%s's required fields %v; %s requires %v", model.Model, haveReq, path, wantReq)
		}
		// An object declared inline in a modelled schema has a model too.
		for name, p := range s.Properties {
			if p.Ref == "" && p.Value != nil && p.Value.Type.Is("object") && len(p.Value.Properties) > 0 {
				if _, ok := py.Models[path+"."+name]; !ok {
					t.Errorf("%s.%s is an object declared inline with no Python model", path, name)
				}
			}
		}
	}

	// Every JSON object a route answers with has a model.
	for route, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status, resp := range op.Responses.Map() {
				if !strings.HasPrefix(status, "2") || resp.Value == nil {
					continue
				}
				mt := resp.Value.Content.Get("application/json")
				if mt == nil || mt.Schema == nil {
					continue
				}
				// One schema, or one of several (a route whose answer
				// depends on its parameters: cancel with ?task=).
				refs := []*openapi3.SchemaRef{mt.Schema}
				if mt.Schema.Ref == "" && mt.Schema.Value != nil && len(mt.Schema.Value.OneOf) > 0 {
					refs = mt.Schema.Value.OneOf
				}
				for _, ref := range refs {
					name := strings.TrimPrefix(ref.Ref, "#/components/schemas/")
					if _, ok := py.Models[name]; !ok {
						t.Errorf("%s %s answers %s with %q, which has no Python model", method, route, status, name)
					}
				}
			}
		}
	}
	// And every error body's field list.
	if _, ok := py.Models["FieldError"]; !ok {
		t.Error("FieldError (an invalid spec's problems) has no Python model")
	}
}
