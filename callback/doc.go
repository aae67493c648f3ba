// Package callback is the HTTP side of the VK Callback API: an http.Handler
// that VK posts community events to.
//
// For every request the Handler checks the method and the body size,
// decodes the JSON envelope, looks the community up by group_id and checks
// its secret in constant time. It answers a confirmation event with that
// community's confirmation string (or, with Group.FetchConfirmation, the
// code VK gives now, within ConfirmWait), decodes a message_new event leniently
// into a Message and passes it to a MessageHandler, and answers every other
// event type with "ok" without acting on it.
//
// The status codes tell VK what to do next:
//
//	200 "ok"   the event was handled (for message_new: counted), or ignored
//	400        the body is not a VK event, or a message lacks what the bot needs
//	403        unknown group_id, wrong secret, or no confirmation string configured
//	405        not a POST
//	413        body over Options.MaxBodyBytes
//	503        the MessageHandler failed or did not answer within Options.Timeout,
//	           VK re-delivers after Retry-After; or no confirmation code is
//	           known and VK gave none within ConfirmWait
//
// Handler.Rejected counts the refused requests (4xx) by Reason: a wrong
// secret, an unknown community, a confirmation with none configured, a
// malformed or too large body, a wrong method.
//
// The package does no counting and calls no VK API: what a message means is
// up to the MessageHandler. A typical set-up:
//
//	h, err := callback.NewHandler(bot, callback.Options{
//		Groups: []callback.Group{{ID: 218245623, Secret: secret, Confirmation: code}},
//		Logger: logger,
//	})
//	if err != nil {
//		return err
//	}
//	mux.Handle("/callback", h)
package callback
