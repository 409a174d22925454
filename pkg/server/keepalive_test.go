package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
)

// endingEvents answers a stream once, then reports when its context ends.
type endingEvents struct {
	gamev1.UnimplementedGameServiceServer
	once  *sync.Once
	ended chan struct{}
}

func (e endingEvents) StreamEvents(_ *gamev1.StreamEventsRequest, ss gamev1.GameService_StreamEventsServer) error {
	if err := ss.Send(&gamev1.StreamEventsResponse{}); err != nil {
		return err
	}
	<-ss.Context().Done()
	e.once.Do(func() { close(e.ended) })
	return ss.Context().Err()
}

// A client that vanishes without closing its connection (a phone out of
// coverage) stops answering the server's pings: its streams must end
// within the keepalive time and timeout, over native gRPC and over
// Connect on HTTP/2 alike, not when TCP gives up many minutes later.
func TestStreamsOfAVanishedClientEnd(t *testing.T) {
	for _, client := range []string{"grpc", "connect over h2c"} {
		t.Run(client, func(t *testing.T) {
			ev := endingEvents{once: &sync.Once{}, ended: make(chan struct{})}
			addr, _ := startServerWith(t, Config{KeepaliveTime: time.Second, KeepaliveTimeout: time.Second},
				func(s *Server) { s.RegisterService(&gamev1.GameService_ServiceDesc, ev) })
			// The proxy stands for the network: once a blackhole, nothing
			// reaches the client, and so nothing comes back from it.
			net := redistest.NewProxy(t, addr)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if client == "grpc" {
				cc, err := grpc.NewClient(net.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					t.Fatal(err)
				}
				defer cc.Close()
				st, err := gamev1.NewGameServiceClient(cc).StreamEvents(ctx, &gamev1.StreamEventsRequest{GameId: "g"})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := st.Recv(); err != nil {
					t.Fatal(err)
				}
			} else {
				connectStream(ctx, t, net.Addr())
			}
			net.Blackhole()
			select {
			case <-ev.ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the stream of a client that vanished is still open 10 s later")
			}
		})
	}
}

// connectStream opens a Connect server stream of StreamEvents over HTTP/2
// without TLS and reads its first message.
func connectStream(ctx context.Context, t *testing.T, addr string) {
	t.Helper()
	msg, err := proto.Marshal(&gamev1.StreamEventsRequest{GameId: "g"})
	if err != nil {
		t.Fatal(err)
	}
	body := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
	body = append(body, msg...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/palace.game.v1.GameService/StreamEvents", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/connect+proto")
	req.Header.Set("Connect-Protocol-Version", "1")
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protos}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	head := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, head); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("connect stream: %d, %v", resp.StatusCode, err)
	}
}
