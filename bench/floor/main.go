// Command floor is the minimal webhook issue 22 compares the bot's with:
// it reads the body, decodes the JSON of a message_new event and answers
// "ok", nothing else. bench/cost.sh drives it and the bot with the same
// client in the same run, for the floor of what HTTP and JSON cost here.
//
//	go run ./bench/floor -addr 127.0.0.1:0   # prints the address it serves
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
)

// event is the part of a message_new event the bot reads.
type event struct {
	Type    string `json:"type"`
	GroupID int    `json:"group_id"`
	EventID string `json:"event_id"`
	Secret  string `json:"secret"`
	Object  struct {
		Message struct {
			ID                    int    `json:"id"`
			PeerID                int    `json:"peer_id"`
			FromID                int    `json:"from_id"`
			ConversationMessageID int    `json:"conversation_message_id"`
			Text                  string `json:"text"`
		} `json:"message"`
	} `json:"object"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to serve on")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stdout, "http://%s/callback\n", ln.Addr())
	log.Fatal(http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var e event
		if err == nil {
			err = json.Unmarshal(body, &e)
		}
		if err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		io.WriteString(w, "ok")
	})))
}
