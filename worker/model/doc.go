// Package model is the task model every part of the worker shares:
// messages and their headers, tasks, attempt and task results, statuses
// and sources, the handler hooks, the interfaces between the parts (task
// runner, deliverer, event recorder, cache), executor health, task labels
// and the recorder events a task emits (Events). It is a leaf under the
// App (package worker): the executor, the sinks, the cache and the
// throughput tracker import it and not the App.
package model
