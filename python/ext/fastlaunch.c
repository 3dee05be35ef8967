/* adjoint._fastlaunch: the per-call path of a prepared Program in C (python/adjoint/program.py).

A Launcher holds what a Program precomputes once: the library's adjoint_launch function, the
program handle, the tensor names and the descriptor array with every dtype, shape and stride
filled in (adjoint_c.h). A call, launcher(tensors, stream), binds the tensors of a dict by name,
compares each with the (dtype, shape, strides, device) last accepted for its position, writes
the data pointers into a copy of the descriptors on the stack, reads the current stream, and
calls adjoint_launch once with the GIL released. A tensor that differs from the accepted record
goes to the Program's full Python checks (accept(index, tensor)), which raise the error naming
it or return its descriptor; the record is then replaced. The call returns False, doing
nothing, where the Python path must run instead: a tensor name is missing, or the current
device is not the program's (the Python path makes it current).

The copy on the stack makes concurrent calls safe without a lock; the records are Python
objects replaced under the GIL. Built against the stable ABI (Py_LIMITED_API 3.10), so one
build loads in every CPython >= 3.10; it needs neither PyTorch nor libadjoint to build.
*/

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "adjoint/adjoint_c.h"

typedef int (*launch_function)(void* program, int count, const char* const* names,
                               const adjoint_tensor* tensors, void* stream);

enum { kStackTensors = 32 };

typedef struct {
  PyObject_HEAD
  launch_function launch;
  void* handle;
  int count;
  const char* const* names;         /* owned by `keepalive` */
  const adjoint_tensor* templates;  /* owned by `keepalive` */
  PyObject* keepalive;
  PyObject* keys;       /* tuple of str: the tensor names, in launch order */
  PyObject** records;   /* per tensor: (dtype, shape, strides, device) or NULL */
  PyObject* accept;     /* accept(index, tensor) -> (descriptor address, owner) */
  PyObject* get_device; /* get_device() -> int */
  PyObject* get_stream; /* get_stream(device index) -> int (a CUstream) */
  PyObject* check_status; /* check_status(status): raises the library's error */
  PyObject* device_index; /* int */
  long device;
} Launcher;

static PyObject* str_dtype;
static PyObject* str_shape;
static PyObject* str_stride;
static PyObject* str_device;
static PyObject* str_data_ptr;

static void* address_of(PyObject* value, const char* what) {
  void* address = PyLong_AsVoidPtr(value);
  if (address == NULL && !PyErr_Occurred()) {
    PyErr_Format(PyExc_ValueError, "Launcher: %s is a null address", what);
  }
  return address;
}

static int launcher_init(Launcher* self, PyObject* args, PyObject* kwargs) {
  PyObject *function, *handle, *names, *templates, *keepalive, *keys, *accept, *get_device,
      *get_stream, *check_status, *device_index;
  static char* keywords[] = {"function", "handle", "names", "templates", "keepalive", "keys",
                             "accept", "get_device", "get_stream", "check_status",
                             "device_index", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOOOOO:Launcher", keywords, &function,
                                   &handle, &names, &templates, &keepalive, &keys, &accept,
                                   &get_device, &get_stream, &check_status, &device_index)) {
    return -1;
  }
  if (!PyTuple_Check(keys)) {
    PyErr_SetString(PyExc_TypeError, "Launcher: keys must be a tuple of tensor names");
    return -1;
  }
  Py_ssize_t count = PyTuple_Size(keys);
  if (count <= 0 || count > 4096) {
    PyErr_Format(PyExc_ValueError, "Launcher: expected 1 to 4096 tensors, got %zd", count);
    return -1;
  }
  self->launch = (launch_function)address_of(function, "function");
  if (self->launch == NULL) return -1;
  self->handle = address_of(handle, "handle");
  if (self->handle == NULL) return -1;
  self->names = (const char* const*)address_of(names, "names");
  if (self->names == NULL) return -1;
  self->templates = (const adjoint_tensor*)address_of(templates, "templates");
  if (self->templates == NULL) return -1;
  self->device = PyLong_AsLong(device_index);
  if (self->device == -1 && PyErr_Occurred()) return -1;
  self->records = (PyObject**)PyMem_Calloc((size_t)count, sizeof(PyObject*));
  if (self->records == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  self->count = (int)count;
  Py_INCREF(keepalive);
  self->keepalive = keepalive;
  Py_INCREF(keys);
  self->keys = keys;
  Py_INCREF(accept);
  self->accept = accept;
  Py_INCREF(get_device);
  self->get_device = get_device;
  Py_INCREF(get_stream);
  self->get_stream = get_stream;
  Py_INCREF(check_status);
  self->check_status = check_status;
  Py_INCREF(device_index);
  self->device_index = device_index;
  return 0;
}

static void launcher_clear_records(Launcher* self) {
  if (self->records == NULL) return;
  for (int i = 0; i < self->count; ++i) Py_CLEAR(self->records[i]);
}

static void launcher_dealloc(Launcher* self) {
  launcher_clear_records(self);
  PyMem_Free(self->records);
  Py_XDECREF(self->keepalive);
  Py_XDECREF(self->keys);
  Py_XDECREF(self->accept);
  Py_XDECREF(self->get_device);
  Py_XDECREF(self->get_stream);
  Py_XDECREF(self->check_status);
  Py_XDECREF(self->device_index);
  PyTypeObject* type = Py_TYPE(self);
  freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
  tp_free(self);
  Py_DECREF(type);
}

/* 1 when `tensor` has the accepted record's dtype, shape, strides and device; 0 when it differs
   (then *fresh holds a new record to store once the full checks pass, or NULL when an attribute
   was missing); -1 on an error other than a missing attribute. */
static int matches_record(PyObject* tensor, PyObject* record, PyObject** fresh) {
  *fresh = NULL;
  PyObject* values[4] = {NULL, NULL, NULL, NULL};
  int result = 0;
  values[0] = PyObject_GetAttr(tensor, str_dtype);
  if (values[0] == NULL) goto missing;
  values[1] = PyObject_GetAttr(tensor, str_shape);
  if (values[1] == NULL) goto missing;
  values[2] = PyObject_CallMethodObjArgs(tensor, str_stride, NULL);
  if (values[2] == NULL) goto missing;
  values[3] = PyObject_GetAttr(tensor, str_device);
  if (values[3] == NULL) goto missing;
  if (record != NULL) {
    result = 1;
    for (int i = 0; i < 4 && result == 1; ++i) {
      PyObject* seen = PyTuple_GetItem(record, i);
      if (seen == values[i]) continue;
      int equal = PyObject_RichCompareBool(values[i], seen, Py_EQ);
      if (equal < 0) {
        PyErr_Clear(); /* an uncomparable attribute: let the full checks judge the tensor */
        equal = 0;
      }
      if (!equal) result = 0;
    }
  }
  if (result == 1) {
    for (int i = 0; i < 4; ++i) Py_DECREF(values[i]);
    return 1;
  }
  *fresh = PyTuple_New(4);
  if (*fresh == NULL) {
    for (int i = 0; i < 4; ++i) Py_XDECREF(values[i]);
    return -1;
  }
  for (int i = 0; i < 4; ++i) PyTuple_SetItem(*fresh, i, values[i]); /* steals */
  return 0;
missing:
  /* not a tensor (or a broken one): the full checks raise the error that names it */
  if (!PyErr_ExceptionMatches(PyExc_AttributeError) && !PyErr_ExceptionMatches(PyExc_TypeError)) {
    for (int i = 0; i < 4; ++i) Py_XDECREF(values[i]);
    return -1;
  }
  PyErr_Clear();
  for (int i = 0; i < 4; ++i) Py_XDECREF(values[i]);
  return 0;
}

/* The data pointer of an accepted tensor into *data; -1 with an exception on failure. */
static int data_pointer(PyObject* tensor, uint64_t* data) {
  PyObject* value = PyObject_CallMethodObjArgs(tensor, str_data_ptr, NULL);
  if (value == NULL) return -1;
  *data = (uint64_t)PyLong_AsUnsignedLongLong(value);
  Py_DECREF(value);
  return PyErr_Occurred() ? -1 : 0;
}

/* The full checks of tensor `index`: copies the descriptor they return into *out. */
static int accept_tensor(Launcher* self, int index, PyObject* tensor, adjoint_tensor* out) {
  PyObject* position = PyLong_FromLong(index);
  if (position == NULL) return -1;
  PyObject* result = PyObject_CallFunctionObjArgs(self->accept, position, tensor, NULL);
  Py_DECREF(position);
  if (result == NULL) return -1;
  if (!PyTuple_Check(result) || PyTuple_Size(result) != 2) {
    Py_DECREF(result);
    PyErr_SetString(PyExc_TypeError, "Launcher: accept must return (address, owner)");
    return -1;
  }
  /* the owner (item 1) keeps the descriptor alive while it is copied */
  void* address = address_of(PyTuple_GetItem(result, 0), "the accepted descriptor");
  if (address != NULL) memcpy(out, address, sizeof(adjoint_tensor));
  Py_DECREF(result);
  return address == NULL ? -1 : 0;
}

static PyObject* launcher_call(Launcher* self, PyObject* args, PyObject* kwargs) {
  PyObject* tensors;
  PyObject* stream = Py_None;
  if (kwargs != NULL && PyDict_Size(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "Launcher: takes (tensors, stream) positionally");
    return NULL;
  }
  if (!PyArg_ParseTuple(args, "O|O:Launcher", &tensors, &stream)) return NULL;
  if (!PyDict_Check(tensors) || PyDict_Size(tensors) != self->count) Py_RETURN_FALSE;

  PyObject* current = PyObject_CallNoArgs(self->get_device);
  if (current == NULL) return NULL;
  long device = PyLong_AsLong(current);
  Py_DECREF(current);
  if (device == -1 && PyErr_Occurred()) return NULL;
  if (device != self->device) Py_RETURN_FALSE;

  adjoint_tensor stack[kStackTensors];
  PyObject* held_stack[kStackTensors];
  adjoint_tensor* bound = stack;
  PyObject** held = held_stack; /* the bound tensors, alive until the launch is queued */
  int held_count = 0;
  if (self->count > kStackTensors) {
    bound = (adjoint_tensor*)PyMem_Malloc(sizeof(adjoint_tensor) * (size_t)self->count);
    held = (PyObject**)PyMem_Malloc(sizeof(PyObject*) * (size_t)self->count);
    if (bound == NULL || held == NULL) {
      PyMem_Free(bound);
      PyMem_Free(held);
      return PyErr_NoMemory();
    }
  }
  PyObject* result = NULL;
  for (int i = 0; i < self->count; ++i) {
    PyObject* tensor = PyDict_GetItemWithError(tensors, PyTuple_GetItem(self->keys, i));
    if (tensor == NULL) {
      if (PyErr_Occurred()) goto done;
      result = Py_False; /* a name is missing: the Python path names it */
      Py_INCREF(result);
      goto done;
    }
    Py_INCREF(tensor);
    held[held_count++] = tensor;
    PyObject* fresh = NULL;
    /* held across the comparison: another thread may replace the record meanwhile */
    PyObject* record = self->records[i];
    Py_XINCREF(record);
    int same = matches_record(tensor, record, &fresh);
    Py_XDECREF(record);
    if (same < 0) goto done;
    if (same) {
      memcpy(&bound[i], &self->templates[i], sizeof(adjoint_tensor));
      if (data_pointer(tensor, &bound[i].data) < 0) goto done;
      continue;
    }
    if (accept_tensor(self, i, tensor, &bound[i]) < 0) {
      Py_XDECREF(fresh);
      goto done;
    }
    if (fresh != NULL) {
      PyObject* old = self->records[i];
      self->records[i] = fresh;
      Py_XDECREF(old);
    }
  }

  void* raw_stream;
  if (stream == Py_None) {
    PyObject* value = PyObject_CallFunctionObjArgs(self->get_stream, self->device_index, NULL);
    if (value == NULL) goto done;
    raw_stream = PyLong_AsVoidPtr(value);
    Py_DECREF(value);
  } else {
    raw_stream = PyLong_AsVoidPtr(stream);
  }
  if (PyErr_Occurred()) goto done;

  int status;
  Py_BEGIN_ALLOW_THREADS
  status = self->launch(self->handle, self->count, self->names, bound, raw_stream);
  Py_END_ALLOW_THREADS
  if (status != 0) {
    PyObject* status_value = PyLong_FromLong(status);
    if (status_value == NULL) goto done;
    PyObject* raised = PyObject_CallFunctionObjArgs(self->check_status, status_value, NULL);
    Py_DECREF(status_value);
    if (raised == NULL) goto done;
    Py_DECREF(raised);
    PyErr_Format(PyExc_RuntimeError, "adjoint_launch failed with status %d", status);
    goto done;
  }
  result = Py_True;
  Py_INCREF(result);
done:
  for (int i = 0; i < held_count; ++i) Py_DECREF(held[i]);
  if (bound != stack) {
    PyMem_Free(bound);
    PyMem_Free(held);
  }
  return result;
}

static PyObject* launcher_forget(Launcher* self, PyObject* unused) {
  (void)unused;
  launcher_clear_records(self);
  Py_RETURN_NONE;
}

/* A launch function that does nothing and succeeds: a Launcher built on it measures the
   binding's own cost per call, without the library's launch (bench/bench_overhead.py). */
static int launch_nothing(void* program, int count, const char* const* names,
                          const adjoint_tensor* tensors, void* stream) {
  (void)program, (void)count, (void)names, (void)tensors, (void)stream;
  return 0;
}

static PyObject* module_launch_nothing_address(PyObject* module, PyObject* unused) {
  (void)module, (void)unused;
  return PyLong_FromVoidPtr((void*)launch_nothing);
}

static PyMethodDef module_methods[] = {
    {"launch_nothing_address", module_launch_nothing_address, METH_NOARGS,
     "The address of a launch function that does nothing (to measure the binding alone)."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef launcher_methods[] = {
    {"forget", (PyCFunction)launcher_forget, METH_NOARGS,
     "Drops every accepted record: the next call runs the full checks on every tensor."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot launcher_slots[] = {
    {Py_tp_doc, (void*)"Launcher(function, handle, names, templates, keepalive, keys, accept, "
                       "get_device, get_stream, check_status, device_index): the per-call "
                       "launch of one prepared program; call it as launcher(tensors, stream)."},
    {Py_tp_new, (void*)PyType_GenericNew},
    {Py_tp_init, (void*)launcher_init},
    {Py_tp_dealloc, (void*)launcher_dealloc},
    {Py_tp_call, (void*)launcher_call},
    {Py_tp_methods, (void*)launcher_methods},
    {0, NULL},
};

static PyType_Spec launcher_spec = {
    "adjoint._fastlaunch.Launcher", sizeof(Launcher), 0, Py_TPFLAGS_DEFAULT, launcher_slots,
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "_fastlaunch",
    "The per-call launch of prepared adjoint programs in C (see python/adjoint/program.py).", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fastlaunch(void) {
  str_dtype = PyUnicode_InternFromString("dtype");
  str_shape = PyUnicode_InternFromString("shape");
  str_stride = PyUnicode_InternFromString("stride");
  str_device = PyUnicode_InternFromString("device");
  str_data_ptr = PyUnicode_InternFromString("data_ptr");
  if (!str_dtype || !str_shape || !str_stride || !str_device || !str_data_ptr) return NULL;
  PyObject* module = PyModule_Create(&module_definition);
  if (module == NULL) return NULL;
  PyObject* type = PyType_FromSpec(&launcher_spec);
  if (type == NULL || PyModule_AddObject(module, "Launcher", type) < 0) {
    Py_XDECREF(type);
    Py_DECREF(module);
    return NULL;
  }
  if (PyModule_AddIntConstant(module, "TENSOR_BYTES", (long)sizeof(adjoint_tensor)) < 0) {
    Py_DECREF(module);
    return NULL;
  }
  return module;
}
