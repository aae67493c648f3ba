package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vkcounter/vkcounter/admin"
	"github.com/vkcounter/vkcounter/internal/eventually"
	"github.com/vkcounter/vkcounter/internal/redistest"
	"github.com/vkcounter/vkcounter/internal/servicetest"
	"github.com/vkcounter/vkcounter/internal/tcptest"
)

// stickerEvent builds a message_new without text holding one sticker.
func stickerEvent(eventID string, peer, cmid int, sticker int64) []byte {
	b, _ := json.Marshal(map[string]any{
		"type": "message_new", "group_id": servicetest.Group, "event_id": eventID, "v": "5.199", "secret": servicetest.Secret,
		"object": map[string]any{
			"message": map[string]any{"id": cmid, "date": 1764115200, "peer_id": peer, "from_id": peer, "text": "", "conversation_message_id": cmid,
				"attachments": []any{map[string]any{"type": "sticker", "sticker": map[string]any{"product_id": 1, "sticker_id": sticker}}}},
		},
	})
	return b
}

// getTexts asks /texts with the query q and decodes the answer.
func (a *app) getTexts(t testing.TB, q url.Values) (int, admin.Answer, string) {
	t.Helper()
	resp, err := http.Get(a.AdminURL("/texts?" + q.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var ans admin.Answer
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &ans); err != nil {
			t.Fatalf("/texts: %v in %s", err, body)
		}
	}
	return resp.StatusCode, ans, string(body)
}

// countEnv is the environment `vkcounter count` needs to read a's Redis.
func (a *app) countEnv(extra map[string]string) map[string]string {
	env := map[string]string{"KEY_PREFIX": a.Prefix, "VK_GROUP_ID": strconv.Itoa(servicetest.Group), "VK_TOKEN": "token-1"}
	if a.Target.Kind == redistest.Cluster {
		env["REDIS_CLUSTER"] = a.Target.Addr
	} else {
		env["REDIS_URL"] = a.Target.URL
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// runCountCmd runs `vkcounter count args` in-process with env as the whole
// environment.
func runCountCmd(env map[string]string, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = runCount(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
	return code, out.String(), errOut.String()
}

// redisState is what the test can see of a Redis: its keys under prefix
// with their values and whether they expire and, on a server of the
// test's own with clients connections open (clients > 0), its key count
// and used memory.
func redisState(t testing.TB, tg *redistest.Target, prefix string, clients int) string {
	t.Helper()
	ctx := context.Background()
	if clients > 0 {
		// A client that closed is freed when Redis reads the close, a
		// little later: wait for it.
		eventually.NoError(t, 10*time.Second, fmt.Sprintf("%d clients", clients), func() error {
			if !strings.Contains(tg.Client.Info(ctx, "clients").Val(), fmt.Sprintf("connected_clients:%d\r\n", clients)) {
				return errors.New(tg.Client.ClientList(ctx).Val())
			}
			return nil
		})
	}
	var keys []string
	for _, k := range redistest.Keys(t, tg.Client, prefix) {
		var v any
		var err error
		switch typ := tg.Client.Type(ctx, k).Val(); typ {
		case "string":
			v, err = tg.Client.Get(ctx, k).Result()
		case "list":
			v, err = tg.Client.LRange(ctx, k, 0, -1).Result()
		case "hash":
			v, err = tg.Client.HGetAll(ctx, k).Result()
		case "zset":
			v, err = tg.Client.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "stream":
			v, err = tg.Client.XRange(ctx, k, "-", "+").Result()
		default:
			t.Fatalf("%s is a %s", k, typ)
		}
		if err != nil {
			t.Fatalf("read %s: %v", k, err)
		}
		keys = append(keys, fmt.Sprintf("%q %v expires=%v", k, v, tg.Client.PTTL(ctx, k).Val() > 0))
	}
	slices.Sort(keys)
	state := strings.Join(keys, "\n")
	if clients > 0 {
		// DBSIZE first: Redis allocates a command's latency histogram
		// (about 24 KB) when the command first runs; INFO last.
		state += fmt.Sprintf("\ndbsize %d", tg.Client.DBSize(ctx).Val())
		var used string
		for _, line := range strings.Split(tg.Client.Info(ctx, "memory").Val(), "\r\n") {
			if strings.HasPrefix(line, "number_of_cached_scripts:") {
				state += "\n" + line
			}
			if strings.HasPrefix(line, "used_memory:") {
				used = "\n" + line
			}
		}
		state += used // last: TestTextsChangeNothing cuts it off
	}
	return state
}

// checkCountSaysSo checks that `vkcounter count` against a's Redis says
// what /texts says of TestTextsAnswerIsNextReply's messages: 3 for the
// normalised text, 2 for the sticker, 0 for a text never sent or keyed
// without NORMALIZE.
func checkCountSaysSo(t *testing.T, a *app) {
	t.Helper()
	env := a.countEnv(map[string]string{"NORMALIZE": "true"})
	if code, out, errOut := runCountCmd(env, "HELLO WORLD", "never sent"); code != exitOK || out != "3\tHELLO WORLD\n0\tnever sent\n" || errOut != "" {
		t.Errorf("count: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, errOut := runCountCmd(env, "-attachment", "sticker:9012"); code != exitOK || out != "2\t[sticker:9012]\n" || errOut != "" {
		t.Errorf("count -attachment: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, _ := runCountCmd(a.countEnv(nil), "HELLO WORLD"); code != exitOK || out != "0\tHELLO WORLD\n" {
		t.Errorf("count without NORMALIZE: exit %d, stdout %q; want 0 (another text key)", code, out)
	}
}

// TestTextsAnswerIsNextReply: /texts and `vkcounter count` answer, with the
// bot's normalisation and text key (a sticker by its key), the number the
// next reply to that text shows, 0 for a text never seen; asking changes
// nothing in Redis.
func TestTextsAnswerIsNextReply(t *testing.T) {
	redistest.Run(t, func(t *testing.T, tg *redistest.Target) {
		a := startApp(t, tg, map[string]string{"NORMALIZE": "true"})
		for i := range 3 {
			a.MustOK(t, servicetest.Event(fmt.Sprintf("h%d", i), 1000+i, 1, "Hello   World"))
		}
		for i := range 2 {
			a.MustOK(t, stickerEvent(fmt.Sprintf("s%d", i), 2000+i, 1, 9012))
		}
		a.WaitSends(t, 5)
		// The count's keys: the activity counters are written in the
		// background, a little after the replies.
		before := redisState(t, tg, a.Prefix+"f:", 0)

		code, ans, body := a.getTexts(t, url.Values{"text": {" hello world", "never sent"}})
		if code != 200 || ans.WindowSeconds != 86400 || !ans.Normalize || len(ans.Texts) != 2 ||
			fmt.Sprint(ans.Texts[0]) != fmt.Sprint(admin.TextCount{GroupID: servicetest.Group, Text: " hello world", Count: 3}) || ans.Texts[1].Count != 0 {
			t.Fatalf("/texts answered %d %s", code, body)
		}
		code, ans, body = a.getTexts(t, url.Values{"attachment": {"sticker:9012"}})
		if code != 200 || len(ans.Texts) != 1 || ans.Texts[0].Count != 2 || ans.Texts[0].Attachments[0] != "sticker:9012" {
			t.Fatalf("/texts for the sticker answered %d %s", code, body)
		}
		checkCountSaysSo(t, a)
		if after := redisState(t, tg, a.Prefix+"f:", 0); after != before {
			t.Errorf("asking changed Redis:\nbefore %s\nafter  %s", before, after)
		}

		a.MustOK(t, servicetest.Event("h-next", 1100, 1, "hello world"))
		a.MustOK(t, stickerEvent("s-next", 2100, 1, 9012))
		sends := a.WaitSends(t, 7)
		got := map[int]string{}
		for _, s := range sends {
			got[s.PeerID] = s.Message
		}
		if got[1100] != "3" || got[2100] != "2" {
			t.Errorf("the next replies were %q and %q; /texts and count said 3 and 2", got[1100], got[2100])
		}
	})
}

// TestTextsChangeNothing: on a Redis of the test's own, what /texts and
// `vkcounter count` run (admin.Count: one pipeline of read-only scripts)
// leaves the keys, their TTLs, the key count and the cached scripts as they
// were, and used_memory within what its clients' buffers move.
func TestTextsChangeNothing(t *testing.T) {
	tg := redistest.OwnServer(t)
	a := startApp(t, tg, nil)
	for i := range 3 {
		a.MustOK(t, servicetest.Event(fmt.Sprintf("h%d", i), 1000+i, 1, "hello"))
	}
	a.WaitSends(t, 3)
	// Closed first, with its senders' polls; the count's script, which it
	// loaded, stays in Redis's cache. The client is connected before the
	// first reading, as connecting changes Redis's client table.
	a.Close()
	rdb, store, _, err := openStore(context.Background(), a.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	ms, err := admin.Question{Texts: []string{"hello", "other"}}.Messages([]int{servicetest.Group})
	if err != nil {
		t.Fatal(err)
	}
	ask := func() {
		t.Helper()
		ans, err := admin.Count(context.Background(), store, false, ms, nil)
		if err != nil || ans.Texts[0].Count != 3 || ans.Texts[1].Count != 0 {
			t.Fatalf("admin.Count = %+v, %v; want 3 and 0", ans, err)
		}
	}
	// Once first: Redis keeps a connection's argument array at the size of
	// its longest command, and the script's is longer than the PING and
	// HELLO the client sent so far.
	// It also opens the connection go-redis keeps for pipelines, apart
	// from its pool (go-redis 9.23, #4002): the look-ups are one pipeline,
	// the PING went through the pool. With the test's own client, 3.
	ask()
	before := redisState(t, tg, a.Prefix, 3)
	for range 3 {
		ask()
	}
	after := redisState(t, tg, a.Prefix, 3)
	// The keys, their values and the cached scripts must be as they were;
	// used_memory also counts the clients' buffers, which Redis sizes to
	// how a pipeline arrives and shrinks on its own time (at load: 45 KB
	// freed, 536 B grown, nothing written): it may fall, and grow by less
	// than a key would take.
	keysBefore, memBefore, _ := strings.Cut(before, "\nused_memory:")
	keysAfter, memAfter, _ := strings.Cut(after, "\nused_memory:")
	m0, err0 := strconv.ParseInt(memBefore, 10, 64)
	m1, err1 := strconv.ParseInt(memAfter, 10, 64)
	if keysAfter != keysBefore || err0 != nil || err1 != nil || m1-m0 >= clientSlack {
		t.Errorf("asking changed Redis:\nbefore %s\nafter  %s", before, after)
	}
}

// clientSlack is how much used_memory may grow between two readings with
// nothing written: a client's query buffer and argument array follow how
// its commands arrive.
const clientSlack = 1024

// TestCountBadQuestions: a wrong question is answered exit 2 by
// `vkcounter count`, naming what is wrong, and reads nothing (its Redis
// is a port nobody listens on: reading would fail with exit 1). /texts
// answers the same questions 400 (admin's TestTextsBadQuestions).
func TestCountBadQuestions(t *testing.T) {
	env := map[string]string{"REDIS_URL": "redis://" + tcptest.FreeAddr(t), "VK_GROUP_ID": strconv.Itoa(servicetest.Group), "VK_TOKEN": "token-1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-attachment", "sticker:1", "a"}, "give texts or attachments, not both"},
		{[]string{"-attachment", "sticker:x"}, `attachment "sticker:x"`},
		{[]string{"-group", "5", "a"}, "community 5 is not served (served: " + strconv.Itoa(servicetest.Group) + ")"},
	} {
		code, out, errOut := runCountCmd(env, tc.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("count %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
