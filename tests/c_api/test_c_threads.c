/* The C API from C threads (POSIX threads): one tern_graph run by 8 threads x 50 runs gives every output the
 * serial runs gave, with no failures; two clones of one tern_model (one set of weights) generate on two threads
 * at once the tokens each generates alone.
 * Usage: test_c_threads MODEL_DIR (a decoder folder whose model.onnx takes input_ids, attention_mask,
 * position_ids and past_key_values.N.key/value [1, heads, past, size]: models/default). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern/tern.h"

#define CASES 6
#define THREADS 8
#define RUNS 50
#define MAX_INPUTS 32

typedef struct {
  tern_tensor inputs[MAX_INPUTS];
  size_t input_count;
  float* logits; /* the serial run's */
  size_t logits_bytes;
} feed_case;

static tern_graph* graph;
static feed_case cases[CASES];

static unsigned next_random(unsigned* state) {
  *state = *state * 1103515245u + 12345u;
  return (*state >> 16) & 0x7fff;
}

/* Feeds for `n` new tokens after `past` cached ones (the past: small random values). */
static void make_case(feed_case* c, unsigned seed, int64_t n, int64_t past) {
  size_t i, count = tern_graph_input_count(graph);
  c->input_count = count;
  for (i = 0; i < count && i < MAX_INPUTS; ++i) {
    tern_value_info info;
    tern_tensor* t = &c->inputs[i];
    size_t k, elements;
    tern_graph_input_info(graph, i, &info);
    t->name = info.name;
    t->dtype = info.dtype;
    if (strcmp(info.name, "input_ids") == 0 || strcmp(info.name, "position_ids") == 0 || strcmp(info.name, "attention_mask") == 0) {
      int64_t* v;
      elements = (size_t)(strcmp(info.name, "attention_mask") == 0 ? past + n : n);
      t->rank = 2, t->shape[0] = 1, t->shape[1] = (int64_t)elements;
      v = malloc(elements * sizeof *v);
      for (k = 0; k < elements; ++k)
        v[k] = info.name[0] == 'i' ? (int64_t)(next_random(&seed) % 1000) : info.name[0] == 'p' ? past + (int64_t)k : 1;
      t->data = v, t->bytes = elements * sizeof *v;
    } else {
      float* v;
      t->rank = 4, t->shape[0] = 1, t->shape[1] = info.shape[1], t->shape[2] = past, t->shape[3] = info.shape[3];
      elements = (size_t)(info.shape[1] * past * info.shape[3]);
      v = malloc(elements * sizeof *v + 1);
      for (k = 0; k < elements; ++k) v[k] = (float)next_random(&seed) / 32768.0f - 0.5f;
      t->data = v, t->bytes = elements * sizeof *v;
    }
  }
}

static void* run_graph(void* arg) {
  long t = (long)arg, r, problems = 0;
  float* mine = NULL;
  size_t mine_bytes = 0;
  for (r = 0; r < RUNS; ++r) {
    feed_case* c = &cases[(t + r) % CASES];
    tern_tensor out;
    memset(&out, 0, sizeof out);
    out.name = "logits";
    if (r % 2) { /* into the caller's buffer, or (even runs) pointing at the thread's own output */
      if (mine_bytes < c->logits_bytes) mine = realloc(mine, mine_bytes = c->logits_bytes);
      out.data = mine, out.bytes = mine_bytes;
    }
    if (tern_graph_run(graph, c->inputs, c->input_count, &out, 1) != TERN_OK) {
      fprintf(stderr, "thread %ld run %ld: %s\n", t, r, tern_graph_error(graph));
      ++problems;
    } else if (out.bytes != c->logits_bytes || memcmp(out.data, c->logits, c->logits_bytes) != 0) {
      fprintf(stderr, "thread %ld run %ld: logits differ from the serial run's\n", t, r);
      ++problems;
    }
  }
  free(mine);
  return (void*)problems;
}

typedef struct {
  tern_model* model;
  int32_t prompt[4];
  int32_t tokens[12];
  int failed;
} sequence_job;

/* With the model's own sampling (models/default: temperature 0.8, top_p 0.95), seeded afresh each time. */
static void* generate_sampled(void* arg) {
  sequence_job* job = arg;
  tern_sampling own;
  int i;
  job->failed = tern_model_sampling_default(job->model, &own) != TERN_OK || tern_model_set_sampling(job->model, &own) != TERN_OK ||
                tern_model_reset(job->model) != TERN_OK || tern_model_prefill(job->model, job->prompt, 4) != TERN_OK;
  for (i = 0; i < 12 && !job->failed; ++i) job->failed = tern_model_step(job->model, &job->tokens[i]) != TERN_OK;
  return NULL;
}

int main(int argc, char** argv) {
  char path[4096];
  tern_options* o = tern_options_create();
  pthread_t threads[THREADS];
  long t, failures = 0;
  size_t i;
  if (argc < 2) return 2;
  tern_options_set_threads(o, 2);
  snprintf(path, sizeof path, "%s/model.onnx", argv[1]);
  if (tern_graph_load(path, o, &graph) != TERN_OK) {
    fprintf(stderr, "load: %s\n", tern_graph_error(graph));
    return 1;
  }
  for (i = 0; i < CASES; ++i) {
    tern_tensor out;
    make_case(&cases[i], (unsigned)i + 1, (int64_t)(i % 2 ? 1 : 2 + i), (int64_t)(i % 3 ? 4 + i : 0));
    memset(&out, 0, sizeof out);
    out.name = "logits";
    if (tern_graph_run(graph, cases[i].inputs, cases[i].input_count, &out, 1) != TERN_OK) {
      fprintf(stderr, "serial run %lu: %s\n", (unsigned long)i, tern_graph_error(graph));
      return 1;
    }
    cases[i].logits = malloc(out.bytes);
    memcpy(cases[i].logits, out.data, out.bytes);
    cases[i].logits_bytes = out.bytes;
  }
  for (t = 0; t < THREADS; ++t) pthread_create(&threads[t], NULL, run_graph, (void*)t);
  for (t = 0; t < THREADS; ++t) {
    void* problems;
    pthread_join(threads[t], &problems);
    failures += (long)problems;
  }
  printf("c threads: %d threads x %d runs on one tern_graph, %ld differences or errors\n", THREADS, RUNS, failures);
  tern_graph_free(graph);

  { /* two clones of one model on two threads: each gives the tokens it gives alone */
    tern_model* model = NULL;
    tern_model* clone = NULL;
    sequence_job jobs[2] = {{NULL, {0, 17, 93, 4}, {0}, 0}, {NULL, {0, 250, 3, 41}, {0}, 0}};
    int32_t alone[2][12];
    int j;
    if (tern_model_load(argv[1], o, &model) != TERN_OK || tern_model_clone(model, &clone) != TERN_OK) {
      fprintf(stderr, "model: %s / %s\n", tern_model_error(model), clone ? tern_model_error(clone) : "");
      return 1;
    }
    for (j = 0; j < 2; ++j) {
      jobs[j].model = model;
      generate_sampled(&jobs[j]);
      memcpy(alone[j], jobs[j].tokens, sizeof alone[j]);
    }
    jobs[0].model = model, jobs[1].model = clone;
    pthread_create(&threads[0], NULL, generate_sampled, &jobs[0]);
    pthread_create(&threads[1], NULL, generate_sampled, &jobs[1]);
    pthread_join(threads[0], NULL);
    pthread_join(threads[1], NULL);
    for (j = 0; j < 2; ++j)
      if (jobs[j].failed || memcmp(alone[j], jobs[j].tokens, sizeof alone[j]) != 0) {
        fprintf(stderr, "sequence %d on two threads differs from alone (or failed: %d)\n", j, jobs[j].failed);
        ++failures;
      }
    tern_model_free(model); /* the clone keeps the weights */
    if (tern_model_reset(clone) != TERN_OK || tern_model_prefill(clone, jobs[0].prompt, 4) != TERN_OK) {
      fprintf(stderr, "the clone after its model was freed: %s\n", tern_model_error(clone));
      ++failures;
    }
    tern_model_free(clone);
    printf("c threads: two clones of one model generate on two threads the tokens each gives alone\n");
  }
  for (i = 0; i < CASES; ++i) {
    size_t k;
    for (k = 0; k < cases[i].input_count; ++k) free(cases[i].inputs[k].data);
    free(cases[i].logits);
  }
  tern_options_free(o);
  return failures == 0 ? 0 : 1;
}
