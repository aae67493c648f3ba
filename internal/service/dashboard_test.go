package service

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/vkcounter/vkcounter/deploy/grafana"
)

// The monitoring files under deploy/.
const (
	rulesFile = "../../deploy/prometheus/vkcounter-rules.yml"
)

// alertRules is the shape of a Prometheus rules file, every field known.
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// checkAlertRules checks that every rule is a named alert with a severity,
// a summary and a description, adds each one's expression to queries and
// returns the alerts' names.
func checkAlertRules(t *testing.T, rules alertRules, queries map[string]string) map[string]bool {
	t.Helper()
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			switch {
			case r.Alert == "" || alerts[r.Alert]:
				t.Errorf("rule %q: every rule is an alert with a name of its own", r.Alert)
			case r.Labels["severity"] != "critical" && r.Labels["severity"] != "warning":
				t.Errorf("alert %s: severity %q, want critical or warning", r.Alert, r.Labels["severity"])
			case r.Annotations["summary"] == "" || r.Annotations["description"] == "":
				t.Errorf("alert %s: needs a summary and a description", r.Alert)
			}
			if _, err := model.ParseDuration(r.For); r.For != "" && err != nil {
				t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
			}
			alerts[r.Alert] = true
			queries["alert "+r.Alert] = r.Expr
		}
	}
	return alerts
}

// promQueries returns every PromQL expression of the alert rules and the
// dashboard, each named by where it is, after checking the files' shape.
func promQueries(t *testing.T) map[string]string {
	t.Helper()
	queries := map[string]string{}
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules alertRules
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	alerts := checkAlertRules(t, rules, queries)
	// The alerts the operators were promised.
	for _, want := range []string{"VkcounterRepliesWaiting", "VkcounterVKFailing", "VkcounterWebhook5xx", "VkcounterRedisUnreachable", "VkcounterCountersRefused", "VkcounterNotReady", "VkcounterTokenRefused"} {
		if !alerts[want] {
			t.Errorf("no alert %s in %s", want, rulesFile)
		}
	}

	d, err := grafana.Read()
	if err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" || !slices.ContainsFunc(d.Templating.List, func(v grafana.Variable) bool {
		return v.Type == "datasource"
	}) {
		t.Errorf("%s: an importable dashboard has a uid, a title and a data source variable", grafana.File)
	}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 || !strings.Contains(string(p.Datasource), "${datasource}") {
			t.Errorf("panel %q: no query, or not on the data source variable", p.Title)
		}
		for i, tg := range p.Targets {
			queries[fmt.Sprintf("panel %q query %d", p.Title, i+1)] = tg.Expr
		}
	}
	return queries
}

// selectorRE finds the series a query names and its label matchers.
var (
	selectorRE = regexp.MustCompile(`\b(vkcounter_[a-z0-9_]+|up)\b(\{[^}]*\})?`)
	matcherRE  = regexp.MustCompile(`([a-z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
)

// scrapeFamilies returns the metric families of a live scrape of the
// service in callback mode with its counter port, and of one in long-poll
// mode (whose series only exist there), after a little traffic.
func scrapeFamilies(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	a := startApp(t, nil, map[string]string{"COUNTER_ADDR": "127.0.0.1:0"})
	a.MustOK(t, event("dash", 1, 1, "hello"))
	a.WaitSends(t, 1)
	lp := startLongPoll(t, nil, newLongPollVK(t, 10), nil)
	families := map[string]*dto.MetricFamily{}
	for _, text := range []string{a.ScrapeMetrics(t), lp.ScrapeMetrics(t)} {
		p := expfmt.NewTextParser(model.UTF8Validation)
		got, err := p.TextToMetricFamilies(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		for name, f := range got {
			if have, ok := families[name]; ok {
				f.Metric = append(f.Metric, have.Metric...)
			}
			families[name] = f
		}
	}
	return families
}

// TestDashboardAndAlertsQueryLiveSeries: every series the Grafana
// dashboard and the alert rules under deploy/ query exists in a live
// scrape, with the labels they match on and label values the service
// produces; where promtool is installed (Debian's prometheus package), it
// parses the rules and every dashboard query as PromQL.
func TestDashboardAndAlertsQueryLiveSeries(t *testing.T) {
	queries := promQueries(t)
	families := scrapeFamilies(t)
	// Series Prometheus adds itself (its labels: checkSelector).
	synthetic := map[string]bool{"up": true}

	for where, q := range queries {
		sels := selectorRE.FindAllStringSubmatch(q, -1)
		if len(sels) == 0 {
			t.Errorf("%s: %q names no vkcounter series", where, q)
		}
		for _, sel := range sels {
			if !synthetic[sel[1]] {
				checkSelector(t, where, sel[1], sel[2], families)
			}
		}
	}

	checkPromQL(t, queries)
}

// TestDashboardImportAndUnits: Grafana's import asks for the data source
// (__inputs), the data source variable starts on the one chosen, a row
// shows readiness and the tokens, and no axis mixes units: every query
// has the unit of what it measures (seconds for latencies and ages, per
// second for rates, plain numbers otherwise), and queries of another unit
// than the panel's sit on the right axis.
func TestDashboardImportAndUnits(t *testing.T) {
	d, err := grafana.Read()
	if err != nil {
		t.Fatal(err)
	}
	checkDataSourceInput(t, d)
	// kind is the unit family a query's values are in.
	kind := func(expr string) string {
		switch {
		case strings.Contains(expr, "histogram_quantile"), !strings.Contains(expr, "rate(") && strings.Contains(expr, "_seconds"):
			return "seconds"
		case strings.Contains(expr, "rate("):
			return "per second"
		}
		return "number"
	}
	unitKind := map[string]string{"s": "seconds", "reqps": "per second", "ops": "per second", "short": "number", "none": "number"}
	rows := map[string]bool{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			rows[p.Title] = true
			continue
		}
		axes := map[string]string{} // placement → unit
		for _, tg := range p.Targets {
			unit, axis := targetUnit(p, tg.RefID)
			if got, want := unitKind[unit], kind(tg.Expr); got != want {
				t.Errorf("panel %q query %s: unit %q, but it measures %s: %s", p.Title, tg.RefID, unit, want, tg.Expr)
			}
			if have, ok := axes[axis]; ok && have != unit {
				t.Errorf("panel %q: the %s axis mixes %s and %s", p.Title, axis, have, unit)
			}
			axes[axis] = unit
		}
	}
	if !rows["Readiness and tokens"] {
		t.Errorf("no row \"Readiness and tokens\": rows %v", rows)
	}
}

// checkSelector checks that the series name a query (where) selects is in
// a live scrape (families; a histogram's _bucket, _sum and _count by its
// own name) with every label its matchers name, and, for an equality, the
// value it matches. The labels Prometheus adds itself are not checked.
func checkSelector(t *testing.T, where, name, matchers string, families map[string]*dto.MetricFamily) {
	t.Helper()
	scrapeLabels := map[string]bool{"instance": true, "job": true}
	f := families[name]
	if f == nil {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && families[base] != nil && families[base].GetType() == dto.MetricType_HISTOGRAM {
				f = families[base]
			}
		}
	}
	if f == nil {
		t.Errorf("%s: series %s is not in a live scrape", where, name)
		return
	}
	for _, m := range matcherRE.FindAllStringSubmatch(matchers, -1) {
		label, op, value := m[1], m[2], m[3]
		if scrapeLabels[label] {
			continue
		}
		values := map[string]bool{}
		for _, metric := range f.Metric {
			for _, lp := range metric.Label {
				if lp.GetName() == label {
					values[lp.GetValue()] = true
				}
			}
		}
		switch {
		case len(values) == 0:
			t.Errorf("%s: %s has no label %q", where, name, label)
		case op == "=" && !values[value]:
			// Every known label set exists from the first scrape.
			t.Errorf("%s: %s{%s=%q}: not in a live scrape", where, name, label, value)
		}
	}
}

// checkPromQL parses the alert rules and every dashboard query (queries)
// as PromQL with promtool, where it is installed.
func checkPromQL(t *testing.T, queries map[string]string) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not installed (Debian: apt-get install prometheus): PromQL syntax not checked")
		return
	}
	// The dashboard's queries as recording rules, its variables filled in.
	fill := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	i := 0
	for where, q := range queries {
		if strings.HasPrefix(where, "panel ") {
			i++
			fmt.Fprintf(&b, "      - record: dashboard:query%d\n        expr: %q\n", i, fill.Replace(q))
		}
	}
	dash := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(dash, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", rulesFile, dash).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
}

// targetUnit is the unit and axis placement of panel p's query refID: the
// panel's unit on the left axis unless an override for the query says
// otherwise.
func targetUnit(p grafana.Panel, refID string) (unit, axis string) {
	unit, axis = p.FieldConfig.Defaults.Unit, "left"
	for _, o := range p.FieldConfig.Overrides {
		if o.Matcher.ID != "byFrameRefID" || o.Matcher.Options != refID {
			continue
		}
		for _, prop := range o.Properties {
			switch prop.ID {
			case "unit":
				unit, _ = prop.Value.(string)
			case "custom.axisPlacement":
				axis, _ = prop.Value.(string)
			}
		}
	}
	return unit, axis
}

// checkDataSourceInput checks that the dashboard d asks its importer for
// one Prometheus data source and starts its data source variable on it.
func checkDataSourceInput(t *testing.T, d grafana.Dashboard) {
	t.Helper()
	if len(d.Inputs) != 1 || d.Inputs[0].Type != "datasource" || d.Inputs[0].PluginID != "prometheus" {
		t.Errorf("__inputs %+v: want one Prometheus data source for the import to ask for", d.Inputs)
		return
	}
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Current.Value != "${"+d.Inputs[0].Name+"}" {
			t.Errorf("data source variable starts on %q, want the imported ${%s}", v.Current.Value, d.Inputs[0].Name)
		}
	}
}
