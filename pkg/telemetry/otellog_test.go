package telemetry

import (
	"bytes"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/go-logr/logr"
)

// TestHideQuotedShowsTheSDKsDiagnostics: what OpenTelemetry's log quotes
// of the variables is hidden, but its SDK's diagnostics keep the names of
// the instruments they are about, and an error that quotes nothing is
// shown whole.
func TestHideQuotedShowsTheSDKsDiagnostics(t *testing.T) {
	var out bytes.Buffer
	log := logr.FromSlogHandler(HideQuoted(slog.NewTextHandler(&out, nil)))
	log.Error(errors.New("instrument type conflict"), "duplicate metric stream definitions", "name", "palace_game_moves_total")
	log.Error(&url.Error{Op: "parse", URL: "https://tenant:SECRET@collector", Err: errors.New("invalid port \":SECRET\" after host")}, "parse url", "input", "https://tenant:SECRET@collector")
	got := out.String()
	for _, want := range []string{"palace_game_moves_total", "instrument type conflict", "parse url"} {
		if !strings.Contains(got, want) {
			t.Errorf("the log lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "SECRET") {
		t.Errorf("the log quotes the variable:\n%s", got)
	}
}

// TestExportErrorTextHidesEveryQuotedHeaderKey: each key gRPC's error
// quotes is hidden, an escaped quote in it included, and the rest of the
// error is shown.
func TestExportErrorTextHidesEveryQuotedHeaderKey(t *testing.T) {
	err := errors.New(`traces export: rpc error: code = Internal desc = header key "abc+SECRET\"one" contains illegal characters; header key "SECRET2" too; header key unquoted`)
	got := ExportErrorText(err)
	if strings.Contains(got, "SECRET") || !strings.Contains(got, "traces export") || !strings.Contains(got, "contains illegal characters") || !strings.Contains(got, "header key unquoted") {
		t.Fatalf("ExportErrorText = %q", got)
	}
}
