package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/personaq/personaq/consumers/client"
)

// cancelView is the confirmation page of a cancel.
type cancelView struct {
	Request, Task, Query string
}

// cancel is POST /cancel: a request (field request) or every open request
// of a task (field task). Without confirm=yes it shows what would be
// cancelled and asks; with it, it cancels (as "console") and goes back to
// the task page.
func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	v := cancelView{Request: r.PostFormValue("request"), Task: r.PostFormValue("task"), Query: r.PostFormValue("q")}
	if (v.Request == "") == (v.Task == "") {
		s.fail(w, r, http.StatusBadRequest, errors.New("cancel: name a request or a task"))
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		s.render(w, r, http.StatusOK, "cancel", page{Title: "Cancel", Nav: "task", Data: v})
		return
	}
	c, err := client.New(client.Config{JetStream: s.cfg.JetStream, Topology: s.cfg.Topology})
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	reason, by := r.PostFormValue("reason"), client.CancelledBy("console")
	if v.Request != "" {
		_, err = c.Cancel(r.Context(), v.Request, reason, by)
	} else {
		_, err = c.CancelTask(r.Context(), v.Task, reason, by)
	}
	if err != nil && !errors.Is(err, client.ErrAlreadyEnded) {
		s.fail(w, r, http.StatusBadGateway, fmt.Errorf("cancel: %w", err))
		return
	}
	s.log.Info().Str("request_id", v.Request).Str("task_id", v.Task).Msg("console: cancelled")
	q := v.Query
	if q == "" {
		q = v.Request + v.Task
	}
	http.Redirect(w, r, "/task?q="+url.QueryEscape(q), http.StatusSeeOther)
}
