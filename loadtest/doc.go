// Package loadtest simulates the traffic vkcounter serves and checks every
// answer, reporting throughput and latency.
//
// RunCallback posts VK Callback API message_new events to a bot's webhook,
// the way VK does (retries with X-Retry-Counter included), while a fake VK
// API (package vktest) receives the bot's replies. Every reply is checked:
// one per event, to the right conversation, with the random_id derived
// from the message, and for each text the numbers 0 … n−1.
//
// RunCounters drives a counter server over the yrmcds counter protocol,
// pipelining requests on several connections, and checks every response
// byte for byte.
//
// Both refuse targets outside the loopback range unless told otherwise,
// stop by themselves (after a count or a duration), and return a Report
// that prints as a table, as JSON, or as a self-contained HTML page.
package loadtest
