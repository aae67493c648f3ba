// Package grafana reads the Grafana dashboard shipped beside it
// (vkcounter.json) into the fields the project's tests check: its import
// inputs, its variables, and each panel's data source, units and queries.
package grafana

import (
	_ "embed"
	"encoding/json"
	"fmt"
)

//go:embed vkcounter.json
var dashboardJSON []byte

// File names the dashboard in error messages.
const File = "deploy/grafana/vkcounter.json"

// A Dashboard is the part of the dashboard's JSON the tests read.
type Dashboard struct {
	UID    string `json:"uid"`
	Title  string `json:"title"`
	Inputs []struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		PluginID string `json:"pluginId"`
	} `json:"__inputs"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
	Panels []Panel `json:"panels"`
}

// A Variable is one of the dashboard's template variables.
type Variable struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Current struct {
		Value string `json:"value"`
	} `json:"current"`
}

// A Panel is one panel of the dashboard (a row is a panel of type "row").
type Panel struct {
	Type        string          `json:"type"`
	Title       string          `json:"title"`
	Datasource  json.RawMessage `json:"datasource"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
		Overrides []struct {
			Matcher struct {
				ID      string `json:"id"`
				Options string `json:"options"`
			} `json:"matcher"`
			Properties []struct {
				ID    string `json:"id"`
				Value any    `json:"value"`
			} `json:"properties"`
		} `json:"overrides"`
	} `json:"fieldConfig"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// Read decodes the shipped dashboard.
func Read() (Dashboard, error) {
	var d Dashboard
	if err := json.Unmarshal(dashboardJSON, &d); err != nil {
		return Dashboard{}, fmt.Errorf("%s: %w", File, err)
	}
	return d, nil
}
