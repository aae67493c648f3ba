// Package client talks to counter servers over the yrmcds counter
// protocol (package wire): Client over one connection (every opcode,
// checked before sending with the server's own rules, and Pipeline, many
// requests in one write), Ring and RingClient over several servers by
// consistent hashing (ketama), with RingPipeline.
//
// It links the protocol codec only: no server, no store, no Redis
// client.
//
//	c, err := client.Dial(ctx, "127.0.0.1:11215")
//	n, err := c.Acquire(ctx, "workers", 1, 10)
package client
