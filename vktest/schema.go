package vktest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The fake checks every request's method and parameters against VK's
// published API schema, as VK would read them: a parameter the method does
// not define, a value of the wrong type or out of range, or a required one
// missing is answered with error 100 and recorded (Violations), so that a
// test of the bot runs against the API VK defines, not against what the
// fake happens to accept.
//
// The table is written from github.com/VKCOM/vk-api-schema at commit
// schemaCommit (API 5.199): messages/methods.json (messages.send),
// messages/objects.json (messages_forward), groups/methods.json (the
// groups.* methods) and execute/methods.json. What the schema leaves out
// comes from VK's method pages, said where it is used: the parameters of
// every request (v, access_token, lang, test_mode), execute's code, and
// messages.send's required random_id (int32).
const schemaCommit = "0efe478fc1011bc167fd389dd1dc36efc883de02"

// A kind is the type of a parameter, as the schema gives it.
type kind int

const (
	kInt         kind = iota // "integer"
	kNumber                  // "number"
	kString                  // "string"
	kBool                    // "boolean": VK reads 0/1 (and true/false)
	kIntList                 // "array" of "integer", comma-separated
	kStringList              // "array" of "string", comma-separated
	kIntOrString             // ["integer", "string"]: an id or a screen name
	kForward                 // a JSON messages_forward object, as a string
)

// A param is one parameter of a method.
type param struct {
	kind     kind
	required bool
	// min and max bound an integer, max the items of a list; hasMin and
	// hasMax say whether they are set.
	min, max       int64
	hasMin, hasMax bool
	// maxLen bounds a string, in characters.
	maxLen int
	// enum lists a string's allowed values; nil means any.
	enum []string
}

func intP() param                { return param{kind: kInt} }
func intMin(min int64) param     { return param{kind: kInt, min: min, hasMin: true} }
func intRange(a, b int64) param  { return param{kind: kInt, min: a, max: b, hasMin: true, hasMax: true} }
func str(maxLen int) param       { return param{kind: kString, maxLen: maxLen} }
func boolP() param               { return param{kind: kBool} }
func (p param) req() param       { p.required = true; return p }
func listOf(k kind, n int) param { return param{kind: k, max: int64(n), hasMax: n > 0} }

// commonParams may be given to every method (VK's "API requests" page):
// the version (required, error 8 without it), the token (else in the
// Authorization header), the language and the test mode.
var commonParams = map[string]param{
	"v": str(0), "access_token": str(0), "lang": str(0), "test_mode": boolP(),
}

// groupID is the group_id of the community methods: required, at least 1.
var groupID = intMin(1).req()

// callbackEvents are the event switches of groups.setCallbackSettings.
var callbackEvents = strings.Fields(`message_new message_reply message_allow message_edit message_deny
	message_typing_state message_read photo_new audio_new video_new wall_reply_new wall_reply_edit
	wall_reply_delete wall_reply_restore wall_post_new wall_repost wall_schedule_post_new
	wall_schedule_post_delete board_post_new board_post_edit board_post_restore board_post_delete
	photo_comment_new photo_comment_edit photo_comment_delete photo_comment_restore video_comment_new
	video_comment_edit video_comment_delete video_comment_restore market_comment_new market_comment_edit
	market_comment_delete market_comment_restore market_order_new market_order_edit poll_vote_new
	group_join group_leave group_change_settings group_change_photo group_officers_edit user_block
	user_unblock lead_forms_new like_add like_remove message_event message_reaction_event
	donut_subscription_create donut_subscription_prolonged donut_subscription_cancelled
	donut_subscription_price_changed donut_subscription_expired donut_money_withdraw
	donut_money_withdraw_error`)

// methods are the methods the fake serves and their parameters.
var methods = map[string]map[string]param{
	"messages.send": {
		"user_id": intP(),
		// Required from API 5.90 (VK's messages.send page); VK's random_id
		// is an int32.
		"random_id":        intRange(math.MinInt32, math.MaxInt32).req(),
		"peer_id":          intP(),
		"peer_ids":         listOf(kIntList, 100),
		"domain":           str(0),
		"chat_id":          intRange(0, 100000000),
		"message":          str(9000),
		"lat":              {kind: kNumber},
		"long":             {kind: kNumber},
		"attachment":       str(9000),
		"reply_to":         intP(),
		"forward_messages": listOf(kIntList, 1000),
		"forward":          {kind: kForward},
		"sticker_id":       intMin(0),
		"group_id":         intMin(0),
		"keyboard":         str(0),
		"template":         str(0),
		"payload":          str(1000),
		"content_source":   str(0),
		"dont_parse_links": boolP(),
		"disable_mentions": boolP(),
		"intent": {kind: kString, enum: []string{"account_update", "bot_ad_invite", "bot_ad_promo", "confirmed_notification",
			"customer_support", "default", "finance_notification", "game_notification", "moderated_newsletter",
			"non_promo_newsletter", "promo_newsletter", "purchase_update"}},
		"subscribe_id": intRange(0, 100),
	},
	// execute's schema lists no parameters; VK's method page gives code
	// (required) and func_v.
	"execute":                            {"code": str(0).req(), "func_v": intP()},
	"groups.getById":                     {"group_ids": listOf(kIntOrString, 0), "group_id": {kind: kIntOrString}, "fields": listOf(kStringList, 0)},
	"groups.getTokenPermissions":         {},
	"groups.getLongPollServer":           {"group_id": groupID},
	"groups.getCallbackConfirmationCode": {"group_id": groupID},
	"groups.getCallbackServers":          {"group_id": groupID, "server_ids": listOf(kIntList, 0)},
	"groups.addCallbackServer":           {"group_id": groupID, "url": str(0).req(), "title": str(14).req(), "secret_key": str(50)},
	"groups.editCallbackServer": {"group_id": groupID, "server_id": intMin(0).req(), "url": str(0).req(),
		"title": str(14).req(), "secret_key": str(50)},
	"groups.getCallbackSettings": {"group_id": groupID, "server_id": intMin(0)},
	"groups.setCallbackSettings": setCallbackSettings(),
}

func setCallbackSettings() map[string]param {
	m := map[string]param{"group_id": groupID, "server_id": intMin(0), "api_version": str(0)}
	for _, e := range callbackEvents {
		m[e] = boolP()
	}
	return m
}

// forwardFields are the members of messages_forward (messages/objects.json).
var forwardFields = map[string]kind{
	"owner_id": kInt, "peer_id": kInt, "conversation_message_ids": kIntList, "cmids": kIntList,
	"message_ids": kIntList, "is_reply": kBool,
}

// checkRequest checks the parameters of a request for method (known to the
// table) as VK reads them: the common ones and the method's own.
func checkRequest(method string, form url.Values) *apiError {
	if form.Get("v") == "" {
		return &apiError{Code: 8, Msg: "Invalid request: v (version) is required"}
	}
	return checkParams(method, form, true)
}

// checkParams checks form against method's parameters; common says whether
// the request's common parameters may be among them (not in an execute
// sub-call).
func checkParams(method string, form map[string][]string, common bool) *apiError {
	params := methods[method]
	names := make([]string, 0, len(form))
	for name := range form {
		names = append(names, name)
	}
	sort.Strings(names) // one message for one request
	for _, name := range names {
		p, ok := params[name]
		if !ok && common {
			p, ok = commonParams[name]
		}
		if !ok {
			return paramError(method, name, "is not a parameter of the method")
		}
		if len(form[name]) != 1 {
			return paramError(method, name, "given more than once")
		}
		if err := p.check(form[name][0]); err != "" {
			return paramError(method, name, err)
		}
	}
	for _, name := range sortedKeys(params) {
		if params[name].required && len(form[name]) == 0 {
			return paramError(method, name, "is required")
		}
	}
	return nil
}

func sortedKeys(m map[string]param) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// paramError is VK's error 100 naming the parameter, with the fake's
// reason.
func paramError(method, name, why string) *apiError {
	return &apiError{Code: 100, Msg: fmt.Sprintf("One of the parameters specified was missing or invalid: %s %s (vktest: %s, vk-api-schema %.7s)", name, why, method, schemaCommit)}
}

// check returns what is wrong with value v of p, or "".
func (p param) check(v string) string {
	switch p.kind {
	case kInt:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Sprintf("%q is not an integer", v)
		}
		if p.hasMin && n < p.min || p.hasMax && n > p.max {
			return fmt.Sprintf("%d is out of range", n)
		}
	case kNumber:
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return fmt.Sprintf("%q is not a number", v)
		}
	case kString:
		if p.maxLen > 0 && utf8.RuneCountInString(v) > p.maxLen {
			return fmt.Sprintf("is longer than %d characters", p.maxLen)
		}
		if p.enum != nil && !slices.Contains(p.enum, v) {
			return fmt.Sprintf("%q is not one of its values", v)
		}
	case kBool:
		switch v {
		case "0", "1", "true", "false":
		default:
			return fmt.Sprintf("%q is not a boolean", v)
		}
	case kIntList, kStringList, kIntOrString:
		items := strings.Split(v, ",")
		if p.kind == kIntOrString && len(items) > 1 {
			return "takes one value"
		}
		if p.hasMax && int64(len(items)) > p.max {
			return fmt.Sprintf("has more than %d items", p.max)
		}
		for _, it := range items {
			if _, err := strconv.ParseInt(it, 10, 64); err != nil && p.kind == kIntList || it == "" {
				return fmt.Sprintf("%q is not a list of its items", v)
			}
		}
	case kForward:
		return checkForward(v)
	}
	return ""
}

// checkForward checks a forward parameter against messages_forward.
func checkForward(v string) string {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(v), &obj); err != nil {
		return "is not a JSON object"
	}
	for name, raw := range obj {
		k, ok := forwardFields[name]
		if !ok {
			return fmt.Sprintf("has %q, not a member of messages_forward", name)
		}
		var err error
		switch k {
		case kInt:
			var n int64
			err = json.Unmarshal(raw, &n)
		case kIntList:
			var ns []int64
			err = json.Unmarshal(raw, &ns)
		case kBool:
			var b bool
			if err = json.Unmarshal(raw, &b); err != nil {
				var n int
				err = json.Unmarshal(raw, &n)
			}
		}
		if err != nil {
			return fmt.Sprintf("member %q has the wrong type", name)
		}
	}
	return ""
}
