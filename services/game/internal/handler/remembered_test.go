package handler

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/palacehq/palace/pkg/apierr"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
)

func TestRememberedAnswersKeepTheirLabel(t *testing.T) {
	answer, err := proto.Marshal(&gamev1.ResignResponse{Game: &gamev1.Game{GameId: "g", Version: 7}})
	if err != nil {
		t.Fatal(err)
	}
	cmd := func(label string) command {
		return command{id: "g", requestID: "r1", label: label, decode: decodeInto(&gamev1.ResignResponse{})}
	}
	stored := append(labelPrefix("the first seat's resignation"), answer...)
	got, err := cmd("the first seat's resignation").remembered(stored)
	if err != nil || got.(*gamev1.ResignResponse).GetGame().GetVersion() != 7 {
		t.Fatalf("the same command: %v, %v", got, err)
	}
	_, err = cmd("the first seat's draw offer").remembered(stored)
	var e *apierr.Error
	if !errors.As(err, &e) || e.Code != apierr.Invalid {
		t.Fatalf("another command: %v, want an Invalid apierr", err)
	}
	// The other seat's answer sends a seat's command to its own field.
	black := cmd("the second seat's resignation")
	black.seated, black.side = true, rules.Second
	if _, err := black.remembered(stored); !errors.Is(err, errOtherSeatsID) {
		t.Fatalf("the other seat's command: %v, want errOtherSeatsID", err)
	}
	if black.field() != "r1" {
		t.Fatalf("an unscoped command's field is %q", black.field())
	}
	black.scoped = true
	if black.field() != "second|r1" {
		t.Fatalf("a scoped command's field is %q", black.field())
	}
	// Answers stored before labels existed are taken as they are.
	if got, err := cmd("the second seat's resignation").remembered(answer); err != nil || got.(*gamev1.ResignResponse).GetGame().GetVersion() != 7 {
		t.Fatalf("an unlabelled answer: %v, %v", got, err)
	}
	if _, err := cmd("x").remembered([]byte{labelMark, 'x'}); err == nil {
		t.Fatal("a label without its end was taken")
	}
}
