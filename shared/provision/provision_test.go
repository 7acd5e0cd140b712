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

// A resource policy's statement that names the handlers' roles (the data
// bucket's: only the installation's roles change the job area) is left
// out of the local data plane, which deploys no roles (the local runner
// hosts the handlers, and the emulator enforces no resource policy); the
// policy's other statements stay, and a policy left with none is dropped.
func TestDataPlaneDropsPolicyStatementsNamingTheHandlers(t *testing.T) {
	tmpl := `{"Resources":{
	  "B":{"Type":"AWS::S3::Bucket"},
	  "R":{"Type":"AWS::IAM::Role"},
	  "P":{"Type":"AWS::S3::BucketPolicy","Properties":{"Bucket":{"Ref":"B"},"PolicyDocument":{"Version":"2012-10-17","Statement":[
	    {"Effect":"Deny","Principal":{"AWS":"*"},"Action":"s3:*","Resource":{"Fn::GetAtt":["B","Arn"]},"Condition":{"Bool":{"aws:SecureTransport":"false"}}},
	    {"Effect":"Deny","Principal":{"AWS":"*"},"Action":"s3:PutObject","Resource":{"Fn::GetAtt":["B","Arn"]},"Condition":{"ArnNotEquals":{"aws:PrincipalArn":[{"Fn::GetAtt":["R","Arn"]}]}}}]}}},
	  "Q":{"Type":"AWS::SQS::Queue"},
	  "QP":{"Type":"AWS::SQS::QueuePolicy","Properties":{"Queues":[{"Ref":"Q"}],"PolicyDocument":{"Statement":[
	    {"Effect":"Allow","Principal":{"AWS":{"Fn::GetAtt":["R","Arn"]}},"Action":"sqs:SendMessage","Resource":{"Fn::GetAtt":["Q","Arn"]}}]}}}}}`
	sub, err := DataPlane([]byte(tmpl))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Resources map[string]struct {
			Type       string
			Properties struct {
				PolicyDocument struct {
					Version   string
					Statement []map[string]any
				}
			}
		}
	}
	if err := json.Unmarshal(sub, &got); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for id := range got.Resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if diff := cmp.Diff([]string{"B", "P", "Q"}, ids); diff != "" {
		t.Errorf("data-plane resources (-want +got):\n%s", diff)
	}
	doc := got.Resources["P"].Properties.PolicyDocument
	if len(doc.Statement) != 1 || doc.Statement[0]["Action"] != "s3:*" || doc.Version != "2012-10-17" {
		t.Errorf("bucket policy %+v, want its TLS statement alone", doc)
	}
}

func TestRefs(t *testing.T) {
	got := refs(json.RawMessage(`{"a":{"Ref":"X"},"b":[{"Fn::GetAtt":["Y","Arn"]}],"c":{"Fn::Sub":"arn:${AWS::Partition}:${Z.Arn}/x"},"d":{"Fn::Sub":["${W}",{}]}}`))
	if diff := cmp.Diff([]string{"AWS::Partition", "W", "X", "Y", "Z"}, got); diff != "" {
		t.Fatalf("refs (-want +got):\n%s", diff)
	}
}

// plain is v as JSON values, without nulls: how the SDK's types and the
// template's properties are compared.
func plain(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	var strip func(any) any
	strip = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if e == nil {
					delete(x, k)
				} else {
					x[k] = strip(e)
				}
			}
		case []any:
			for i, e := range x {
				x[i] = strip(e)
			}
		}
		return v
	}
	return strip(out)
}

// TestSplitTablesOfTheDefaultTemplate: with DynamoDB apart from
// CloudFormation, the template's table is created from its own properties
// under a name derived from the prefix, and the stack keeps the rest and
// names the table in its output.
func TestSplitTablesOfTheDefaultTemplate(t *testing.T) {
	body, err := DataPlane(template.JSON)
	if err != nil {
		t.Fatal(err)
	}
	tables, rest, err := splitTables(body, "bw-x")
	if err != nil {
		t.Fatal(err)
	}
	var full struct {
		Resources map[string]struct {
			Type       string
			Properties map[string]json.RawMessage
		}
		Outputs map[string]map[string]any
	}
	if err := json.Unmarshal(template.JSON, &full); err != nil {
		t.Fatal(err)
	}
	var want []string
	for id, r := range full.Resources {
		if r.Type == "AWS::DynamoDB::Table" {
			want = append(want, id)
		}
	}
	if len(tables) != 1 || len(want) != 1 || tables[0].id != want[0] {
		t.Fatalf("tables %+v, want the template's %v", tables, want)
	}
	tb, props := tables[0], full.Resources[want[0]].Properties
	if got := *tb.input.TableName; got != "bw-x-"+tb.id {
		t.Errorf("table name %s, want bw-x-%s", got, tb.id)
	}
	for prop, got := range map[string]any{
		"KeySchema": tb.input.KeySchema, "AttributeDefinitions": tb.input.AttributeDefinitions,
		"GlobalSecondaryIndexes": tb.input.GlobalSecondaryIndexes, "BillingMode": tb.input.BillingMode,
		"TimeToLiveSpecification": tb.ttl,
	} {
		if _, ok := props[prop]; !ok {
			t.Errorf("template table has no %s", prop)
			continue
		}
		if diff := cmp.Diff(plain(t, props[prop]), plain(t, got)); diff != "" {
			t.Errorf("%s (-template +create):\n%s", prop, diff)
		}
	}

	var stack struct {
		Resources map[string]struct{ Type string }
		Outputs   map[string]map[string]any
	}
	if err := json.Unmarshal(rest, &stack); err != nil {
		t.Fatal(err)
	}
	for id, r := range stack.Resources {
		if r.Type == "AWS::DynamoDB::Table" {
			t.Errorf("table %s still in the stack", id)
		}
	}
	if n := countDataPlane(t); len(stack.Resources) != n-1 {
		t.Errorf("stack has %d resources, want the data plane's %d less the table", len(stack.Resources), n)
	}
	out := stack.Outputs[template.OutTable]
	if out["Value"] != "bw-x-"+tb.id || out["Description"] != full.Outputs[template.OutTable]["Description"] {
		t.Errorf("table output %v, want the table's name with the template's description", out)
	}
	for _, k := range resourceOutputs {
		if k != template.OutTable && cmp.Diff(full.Outputs[k], stack.Outputs[k]) != "" {
			t.Errorf("output %s changed: %v", k, stack.Outputs[k])
		}
	}
}

func countDataPlane(t *testing.T) int {
	t.Helper()
	body, err := DataPlane(template.JSON)
	if err != nil {
		t.Fatal(err)
	}
	var dp struct{ Resources map[string]any }
	if err := json.Unmarshal(body, &dp); err != nil {
		t.Fatal(err)
	}
	return len(dp.Resources)
}

func TestSplitTablesErrors(t *testing.T) {
	cases := []struct {
		name, template, want string
	}{
		{"unknown property", `{"Resources":{"T":{"Type":"AWS::DynamoDB::Table","Properties":{"SSESpecification":{"SSEEnabled":true}}}}}`,
			`template table T: properties this package cannot apply: json: unknown field "SSESpecification"`},
		{"refers to the table", `{"Resources":{"T":{"Type":"AWS::DynamoDB::Table","Properties":{}},"Q":{"Type":"AWS::SQS::Queue","Properties":{"Tags":[{"Key":"t","Value":{"Ref":"T"}}]}}}}`,
			"Q refers to table T"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := splitTables([]byte(c.template), "p")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}
