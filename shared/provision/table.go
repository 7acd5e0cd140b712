package provision

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// dynamoApart reports whether cfg sends DynamoDB requests to another
// endpoint than CloudFormation's (DynamoDB Local beside moto, or
// AWS_ENDPOINT_URL_DYNAMODB), as the SDK resolves them for clients built
// from cfg. A table CloudFormation created would then be out of reach.
func dynamoApart(cfg aws.Config) bool {
	return aws.ToString(dynamodb.NewFromConfig(cfg).Options().BaseEndpoint) !=
		aws.ToString(cloudformation.NewFromConfig(cfg).Options().BaseEndpoint)
}

// table is an AWS::DynamoDB::Table of the template, to be created on the
// DynamoDB endpoint directly.
type table struct {
	id    string // logical id
	input *dynamodb.CreateTableInput
	ttl   *types.TimeToLiveSpecification
}

// cfnTable is the part of AWS::DynamoDB::Table's properties this package
// can apply. CloudFormation's property names are the DynamoDB API's
// (KeySchema, GlobalSecondaryIndexes, Projection, ...), so the SDK's own
// types decode them. Any other property is an error: a new one in the
// template must be applied or knowingly skipped here, never dropped
// silently.
type cfnTable struct {
	TableName               *string
	KeySchema               []types.KeySchemaElement
	AttributeDefinitions    []types.AttributeDefinition
	GlobalSecondaryIndexes  []types.GlobalSecondaryIndex
	LocalSecondaryIndexes   []types.LocalSecondaryIndex
	BillingMode             types.BillingMode
	ProvisionedThroughput   *types.ProvisionedThroughput
	StreamSpecification     *struct{ StreamViewType types.StreamViewType }
	TimeToLiveSpecification *types.TimeToLiveSpecification
	// Skipped: DynamoDB Local has no backups (UpdateContinuousBackups is
	// an unknown operation there), and recovery changes no request.
	PointInTimeRecoverySpecification json.RawMessage
}

// splitTables takes the AWS::DynamoDB::Table resources out of a data-plane
// template and returns them as tables named "<prefix>-<logical id>" (or
// their TableName), with the rest of the template. An output that is a
// table's Ref becomes the table's name, so the stack still reports every
// resource (FromStack); other outputs referring to a table are dropped.
func splitTables(body []byte, prefix string) ([]table, []byte, error) {
	var t map[string]json.RawMessage
	if err := json.Unmarshal(body, &t); err != nil {
		return nil, nil, fmt.Errorf("parse template: %w", err)
	}
	var res, outs map[string]json.RawMessage
	if err := json.Unmarshal(t["Resources"], &res); err != nil {
		return nil, nil, fmt.Errorf("parse template resources: %w", err)
	}
	if o, ok := t["Outputs"]; ok {
		if err := json.Unmarshal(o, &outs); err != nil {
			return nil, nil, fmt.Errorf("parse template outputs: %w", err)
		}
	}
	var tables []table
	names := map[string]string{}
	for id, raw := range res {
		var r struct {
			Type       string
			Properties json.RawMessage
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, nil, fmt.Errorf("parse template resource %s: %w", id, err)
		}
		if r.Type != "AWS::DynamoDB::Table" {
			continue
		}
		tb, err := tableOf(id, r.Properties, prefix)
		if err != nil {
			return nil, nil, err
		}
		tables = append(tables, tb)
		names[id] = *tb.input.TableName
		delete(res, id)
	}
	sort.Slice(tables, func(i, j int) bool { return tables[i].id < tables[j].id })
	for id, raw := range res {
		for _, ref := range refs(raw) {
			if _, ok := names[ref]; ok {
				return nil, nil, fmt.Errorf("template: %s refers to table %s, which is created outside the stack", id, ref)
			}
		}
	}
	for k, v := range outs {
		var o map[string]json.RawMessage
		var value struct{ Ref string }
		if json.Unmarshal(v, &o) == nil && json.Unmarshal(o["Value"], &value) == nil && names[value.Ref] != "" {
			o["Value"], _ = json.Marshal(names[value.Ref])
			outs[k], _ = json.Marshal(o)
			continue
		}
		for _, ref := range refs(v) {
			if names[ref] != "" {
				delete(outs, k)
			}
		}
	}
	var err error
	if t["Resources"], err = json.Marshal(res); err != nil {
		return nil, nil, err
	}
	if t["Outputs"], err = json.Marshal(outs); err != nil {
		return nil, nil, err
	}
	rest, err := json.Marshal(t)
	return tables, rest, err
}

// tableOf reads one table's properties.
func tableOf(id string, props json.RawMessage, prefix string) (table, error) {
	var p cfnTable
	dec := json.NewDecoder(bytes.NewReader(props))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return table{}, fmt.Errorf("template table %s: properties this package cannot apply: %w", id, err)
	}
	name := prefix + "-" + id
	if p.TableName != nil {
		name = *p.TableName
	}
	in := &dynamodb.CreateTableInput{
		TableName: aws.String(name), KeySchema: p.KeySchema, AttributeDefinitions: p.AttributeDefinitions,
		GlobalSecondaryIndexes: p.GlobalSecondaryIndexes, LocalSecondaryIndexes: p.LocalSecondaryIndexes,
		BillingMode: p.BillingMode, ProvisionedThroughput: p.ProvisionedThroughput,
	}
	if s := p.StreamSpecification; s != nil {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: s.StreamViewType}
	}
	return table{id: id, input: in, ttl: p.TimeToLiveSpecification}, nil
}

// createTable creates the table unless it exists (then it is reused, so
// Create stays idempotent), waits until it is ACTIVE and enables its TTL.
func createTable(ctx context.Context, db *dynamodb.Client, t table) error {
	name := aws.ToString(t.input.TableName)
	_, err := db.CreateTable(ctx, t.input)
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	if err := dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &name}, 2*time.Minute); err != nil {
		return fmt.Errorf("table %s: wait until active: %w", name, err)
	}
	if t.ttl == nil || !aws.ToBool(t.ttl.Enabled) {
		return nil
	}
	// Enabling TTL twice is an error, so look first (a reused table), and
	// look again after an error: a retry of a request whose response was
	// lost fails "TimeToLive is already enabled".
	if on, err := ttlOn(ctx, db, name); err != nil || on {
		return err
	}
	if _, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: &name, TimeToLiveSpecification: t.ttl}); err != nil {
		if on, _ := ttlOn(ctx, db, name); on {
			return nil
		}
		return fmt.Errorf("table %s: enable ttl: %w", name, err)
	}
	return nil
}

// ttlOn reports whether the table's TTL is enabled or being enabled.
func ttlOn(ctx context.Context, db *dynamodb.Client, name string) (bool, error) {
	d, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &name})
	if err != nil {
		return false, fmt.Errorf("table %s: describe ttl: %w", name, err)
	}
	st := d.TimeToLiveDescription
	return st != nil && (st.TimeToLiveStatus == types.TimeToLiveStatusEnabled || st.TimeToLiveStatus == types.TimeToLiveStatusEnabling), nil
}
