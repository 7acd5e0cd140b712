package lineage

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
)

// The environment variables, OpenLineage's own (as its clients and
// Airflow's provider read them). Lineage is off unless OPENLINEAGE_URL is
// set.
const (
	// EnvURL is the endpoint's base URL, e.g. http://marquez:5000.
	EnvURL = "OPENLINEAGE_URL"
	// EnvEndpoint is the path under it events are POSTed to;
	// api/v1/lineage unless set.
	EnvEndpoint = "OPENLINEAGE_ENDPOINT"
	// EnvAPIKey, when set, is sent as a bearer token.
	EnvAPIKey = "OPENLINEAGE_API_KEY"
	// EnvNamespace is the jobs' namespace; batchwork://<installation>
	// unless set.
	EnvNamespace = "OPENLINEAGE_NAMESPACE"
	// EnvDisabled=true turns lineage off whatever else is set.
	EnvDisabled = "OPENLINEAGE_DISABLED"
)

// DefaultEndpoint is the path of OpenLineage's HTTP API.
const DefaultEndpoint = "api/v1/lineage"

// Config is where lineage goes.
type Config struct {
	// URL is the endpoint's base URL; empty: lineage is off.
	URL       string
	Endpoint  string
	APIKey    string
	Namespace string
}

// ConfigFromEnv reads the configuration through getenv (os.Getenv). A
// malformed setting is an error naming its variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	if strings.EqualFold(strings.TrimSpace(getenv(EnvDisabled)), "true") {
		return Config{}, nil
	}
	c := Config{
		URL: strings.TrimSpace(getenv(EnvURL)), Endpoint: strings.TrimSpace(getenv(EnvEndpoint)),
		APIKey: strings.TrimSpace(getenv(EnvAPIKey)), Namespace: strings.TrimSpace(getenv(EnvNamespace)),
	}
	if c.URL == "" {
		return Config{}, nil
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Config{}, fmt.Errorf("%s: %q must be an http or https URL with a host, e.g. http://marquez:5000", EnvURL, c.URL)
	}
	if strings.Contains(c.Endpoint, "://") {
		return Config{}, fmt.Errorf("%s: %q must be a path under %s, e.g. %s", EnvEndpoint, c.Endpoint, EnvURL, DefaultEndpoint)
	}
	return c, nil
}

// Enabled reports whether lineage goes anywhere.
func (c Config) Enabled() bool { return c.URL != "" }

// EndpointURL is the URL events are POSTed to.
func (c Config) EndpointURL() string {
	ep := c.Endpoint
	if ep == "" {
		ep = DefaultEndpoint
	}
	return strings.TrimRight(c.URL, "/") + "/" + strings.TrimLeft(ep, "/")
}

// NamespaceOr is the configured namespace, or batchwork://<installation>.
func (c Config) NamespaceOr(installation string) string {
	if c.Namespace != "" {
		return c.Namespace
	}
	return "batchwork://" + installation
}

// NewSink returns the sink of c, for the installation named installation
// (its table's name), reading jobs and plans through the ports given.
func NewSink(c Config, installation string, jobs Jobs, plans Plans, log *slog.Logger) *Sink {
	return &Sink{
		Builder: &Builder{Namespace: c.NamespaceOr(installation), Jobs: jobs, Plans: plans},
		Transport: &Transport{
			Endpoint: c.EndpointURL(), APIKey: c.APIKey, Client: &http.Client{},
			Attempts: DefaultAttempts, AttemptTimeout: DefaultAttemptTimeout, Backoff: DefaultBackoff,
		},
		Log: log,
	}
}
