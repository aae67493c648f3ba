package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/vkcounter/vkcounter/admin"
)

// countAdminTimeout bounds `vkcounter count`'s question to a running
// service's /texts.
const countAdminTimeout = 10 * time.Second

// askService asks q of /texts on the admin address of the service
// running beside the command (ADMIN_ADDR, dialled as healthcheck dials
// it), for a service whose Redis is embedded in it. It returns the answer
// and the URL it asked.
func askService(ctx context.Context, adminAddr string, q admin.Question) (admin.Answer, string, error) {
	target, err := dialable(adminAddr)
	if err != nil {
		return admin.Answer{}, "", fmt.Errorf("ADMIN_ADDR %q: %w", adminAddr, err)
	}
	v := url.Values{"text": q.Texts, "attachment": q.Attachments}
	if q.Group != 0 {
		v.Set("group", strconv.Itoa(q.Group))
	}
	where := "http://" + target + "/texts"
	ctx, cancel := context.WithTimeout(ctx, countAdminTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, where+"?"+v.Encode(), nil)
	if err != nil {
		return admin.Answer{}, where, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return admin.Answer{}, where, fmt.Errorf("no service answers at %s (ADMIN_ADDR): start it, or give its REDIS_URL or REDIS_CLUSTER: %w", where, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTextsAnswerBytes+1))
	if err != nil {
		return admin.Answer{}, where, fmt.Errorf("%s: %w", where, err)
	}
	if len(body) > maxTextsAnswerBytes {
		return admin.Answer{}, where, fmt.Errorf("%s: answer longer than %d bytes", where, maxTextsAnswerBytes)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			e.Error = string(body)
		}
		if resp.StatusCode == http.StatusBadRequest {
			return admin.Answer{}, where, questionError{errors.New(e.Error)}
		}
		return admin.Answer{}, where, fmt.Errorf("%s answered %d: %s", where, resp.StatusCode, e.Error)
	}
	var ans admin.Answer
	if err := json.Unmarshal(body, &ans); err != nil {
		return admin.Answer{}, where, fmt.Errorf("%s: not a /texts answer: %w", where, err)
	}
	return ans, where, nil
}

// maxTextsAnswerBytes bounds the answer `count` reads from /texts: at most
// admin.MaxAnswers counts, each of a text VK bounds to a few kilobytes.
const maxTextsAnswerBytes = 64 << 20
