package handler

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/palacehq/palace/pkg/apierr"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
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
	_, err = cmd("the second seat's resignation").remembered(stored)
	var e *apierr.Error
	if !errors.As(err, &e) || e.Code != apierr.Invalid {
		t.Fatalf("another seat's command: %v, want an Invalid apierr", err)
	}
	// Answers stored before labels existed are taken as they are.
	if got, err := cmd("the second seat's resignation").remembered(answer); err != nil || got.(*gamev1.ResignResponse).GetGame().GetVersion() != 7 {
		t.Fatalf("an unlabelled answer: %v, %v", got, err)
	}
	if _, err := cmd("x").remembered([]byte{labelMark, 'x'}); err == nil {
		t.Fatal("a label without its end was taken")
	}
}
