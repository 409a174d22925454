package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
)

// rawCodec sends a request's bytes as they are, so a test can send what no
// generated client would, and decodes answers as protobuf.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	return proto.Unmarshal(b, v.(proto.Message))
}
func (rawCodec) Name() string { return "proto" }

// getGameWithID is a GetGameRequest whose game_id is id, however invalid.
func getGameWithID(id string) []byte {
	return protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), id)
}

// A request that does not decode is the client's fault: grpc-go and the
// transcoder would answer Internal or Unknown, which tells a client
// developer (and alerting on server faults) the opposite. Every protocol
// answers InvalidArgument, before the handler runs.
func TestMalformedRequestsAreInvalidArgument(t *testing.T) {
	addr, cc, calls := startCountingGame(t)
	bad := map[string][]byte{
		"string not UTF-8": getGameWithID("g\xffg"),
		"not protobuf":     {0xff, 0xff, 0xff},
	}
	for name, body := range bad {
		t.Run("grpc unary "+name, func(t *testing.T) {
			before := calls.Load()
			err := cc.Invoke(context.Background(), "/palace.game.v1.GameService/GetGame", body, new(gamev1.GetGameResponse), grpc.ForceCodec(rawCodec{}))
			wantMalformed(t, err, calls.Load() > before)
		})
		t.Run("grpc stream "+name, func(t *testing.T) {
			desc := &grpc.StreamDesc{ServerStreams: true}
			st, err := cc.NewStream(context.Background(), desc, "/palace.game.v1.GameService/StreamEvents", grpc.ForceCodec(rawCodec{}))
			if err != nil {
				t.Fatal(err)
			}
			if err := st.SendMsg(body); err != nil {
				t.Fatal(err)
			}
			if err := st.CloseSend(); err != nil {
				t.Fatal(err)
			}
			// countingGame does not stream: a request that reached the
			// handler would end Unimplemented.
			wantMalformed(t, st.RecvMsg(new(gamev1.StreamEventsResponse)), false)
		})
		t.Run("connect proto "+name, func(t *testing.T) {
			before := calls.Load()
			code, msg := connectCall(t, addr, "application/proto", body)
			if code != "invalid_argument" || !strings.Contains(msg, "malformed request") || calls.Load() > before {
				t.Fatalf("%s %q, handler ran %v; want invalid_argument naming a malformed request before the handler", code, msg, calls.Load() > before)
			}
		})
	}
	for name, body := range map[string]string{
		"not JSON":         `not json`,
		"empty":            ``,
		"string not UTF-8": "{\"gameId\":\"g\xffg\"}",
		"wrong type":       `{"gameId":7}`,
	} {
		t.Run("connect json "+name, func(t *testing.T) {
			before := calls.Load()
			code, msg := connectCall(t, addr, "application/json", []byte(body))
			if code != "invalid_argument" || !strings.Contains(msg, "malformed request") || calls.Load() > before {
				t.Fatalf("%s %q, handler ran %v; want invalid_argument naming a malformed request before the handler", code, msg, calls.Load() > before)
			}
		})
	}
	// Well-formed requests are served, unknown fields (a newer client's)
	// included.
	withUnknown := protowire.AppendVarint(protowire.AppendTag(getGameWithID("g"), 99, protowire.VarintType), 1)
	var resp gamev1.GetGameResponse
	if err := cc.Invoke(context.Background(), "/palace.game.v1.GameService/GetGame", withUnknown, &resp, grpc.ForceCodec(rawCodec{})); err != nil || resp.GetGame().GetGameId() != "g" {
		t.Fatalf("a request with an unknown field: %v, %v", &resp, err)
	}
	if code, msg := connectCall(t, addr, "application/json", []byte(`{"gameId":"g","newerField":1}`)); code != "" {
		t.Fatalf("a well-formed JSON request: %s %q", code, msg)
	}
}

func wantMalformed(t *testing.T, err error, ran bool) {
	t.Helper()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "malformed request") || ran {
		t.Fatalf("%v, handler ran %v; want InvalidArgument naming a malformed request before the handler", err, ran)
	}
}

// connectCall calls GetGame over Connect and returns the error's code and
// message ("" for an answer).
func connectCall(t *testing.T, addr, contentType string, body []byte) (code, msg string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/GetGame", bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Connect-Protocol-Version", "1")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		return "", ""
	}
	var e struct{ Code, Message string }
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("HTTP %d: %q is not a Connect error", resp.StatusCode, b)
	}
	return e.Code, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, e.Message)
}

// A Duration or Timestamp that its own type refuses (nanos out of range,
// mixed signs) is a malformed request, at any depth: read as it is, it
// would be taken for another value than the client meant.
func TestInvalidTimesAreMalformed(t *testing.T) {
	_, cc, calls := startCountingGame(t)
	byoYomi := func(main *durationpb.Duration) *gamev1.CreateGameRequest {
		return &gamev1.CreateGameRequest{TimeControl: &commonv1.TimeControl{Control: &commonv1.TimeControl_ByoYomi{ByoYomi: &commonv1.ByoYomi{
			MainTime: main, Periods: 3, PeriodTime: durationpb.New(30 * time.Second),
		}}}}
	}
	for name, c := range map[string]struct {
		method string
		req    proto.Message
		field  string
	}{
		"nanos of two seconds": {"MakeMove", &gamev1.MakeMoveRequest{ReportedLag: &durationpb.Duration{Nanos: 2e9}}, "reported_lag"},
		"mixed signs":          {"CreateGame", byoYomi(&durationpb.Duration{Seconds: 2, Nanos: -1}), "time_control.byo_yomi.main_time"},
		"beyond its range":     {"CreateGame", byoYomi(&durationpb.Duration{Seconds: 1 << 62}), "time_control.byo_yomi.main_time"},
	} {
		t.Run(name, func(t *testing.T) {
			before := calls.Load()
			err := cc.Invoke(context.Background(), "/palace.game.v1.GameService/"+c.method, c.req, new(emptypb.Empty))
			wantMalformed(t, err, calls.Load() > before)
			if msg := status.Convert(err).Message(); !strings.Contains(msg, c.field+": ") {
				t.Fatalf("%q does not name %s", msg, c.field)
			}
		})
	}
	// Valid times pass, negative ones included (the handler judges those).
	for _, d := range []*durationpb.Duration{{Seconds: -2, Nanos: -5}, durationpb.New(90 * time.Second)} {
		if why, bad := invalidTime(byoYomi(d)); bad {
			t.Errorf("%v refused: %s", d, why)
		}
	}
}
