/* The eager launch path's common case in C (Note [the native launch path], _native.py).
 *
 * The objects of kernel.py's Python path, which stays the reference and the fallback:
 *   Launcher  the base of kernel.TritonKernel: `kernel`, `info`; `[grid]` makes a Bound;
 *             `run(*args, grid=, **kwargs)` launches.
 *   Bound     `wrap_triton(k)[grid]`: calling it launches.
 *   wrap_triton(kernel)  the public function: a TritonKernel for a kernel described before
 *             (wrapper_for, through a cache of recent hits), else kernel._wrap_new(kernel).
 * The mode probes are read in libtorch where _native.install_probes found them (Note [probes
 * read in libtorch]), else through torch's Python bindings.
 *
 * A launch takes the common case only when _BoundLaunch.__call__ (kernel.py) would: a grid of 1 to
 * 3 ints, no dispatch mode, no functorch transform, ints, plain tensors (not meta) and constants,
 * and, for an interpreted kernel, only keywords it knows. It then calls exactly
 * `kernel.run(*args, grid=grid, warmup=False, **kwargs)`, and a failure goes to
 * `_after_failure` as an exception being handled. Anything else goes to kernel.py's `_launch`
 * through `general(kernel, info, grid, args, kwargs)`, which checks everything.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#if PY_VERSION_HEX < 0x030B0000
#error "the native launch path needs Python 3.11 (PyErr_SetHandledException)"
#endif

/* What configure() hands over from Python. */
static PyObject *g_general;         /* general(kernel, info, grid, args, kwargs) */
static PyObject *g_after_failure;   /* _after_failure(error, kernel, info, grid, args, kwargs) */
static PyObject *g_run_slow;        /* TritonKernel's Python run(self, *args, **kwargs) */
static PyObject *g_stack_len;       /* torch._C._len_torch_dispatch_stack */
static PyObject *g_interpreter;     /* torch._C._functorch.peek_interpreter_stack */
static PyObject *g_tensor;          /* torch.Tensor */
static PyObject *g_parameter;       /* torch.nn.Parameter */
static PyObject *g_traceable;       /* (Tensor, SymInt, SymFloat, SymBool) */
static PyObject *g_infos;           /* launch_spec._infos: object.__hash__(kernel) -> (ref, info) */
static PyTypeObject *g_wrapper_type; /* kernel.TritonKernel */
static PyObject *g_is_meta;         /* TensorBase.is_meta, a getset descriptor, or NULL */

/* The same two probes read in libtorch itself where _native.install_probes found them and they
 * answered as the Python ones (Note [probes read in libtorch]), else NULL:
 * c10::impl::TorchDispatchModeTLS::stack_len() and at::functorch::getDynamicLayerStack(), which
 * returns a const std::vector<DynamicLayer>& (its first two words: begin and end). */
typedef int64_t (*stack_len_fn)(void);
typedef void *const *(*layer_stack_fn)(void);
static stack_len_fn c_stack_len;
static layer_stack_fn c_layer_stack;

static PyObject *s_run, *s_is_meta, *s_interpreted, *s_keyword_names, *s_grid, *s_warmup;
static PyObject *s_grid_warmup; /* ("grid", "warmup") */

typedef struct {
    PyObject_HEAD
    PyObject *kernel;
    PyObject *info;
} Launcher;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *kernel;
    PyObject *info;
    PyObject *grid;
} Bound;

/* Keyword-name tuples derived from a call site's own (the same tuple object on every call from
 * that site): a few entries, looked up by identity. */
#define NAMES_CACHE 8
typedef struct {
    PyObject *from[NAMES_CACHE], *to[NAMES_CACHE];
    int next;
} NamesCache;

static PyObject *
cache_get(NamesCache *cache, PyObject *kwnames)
{
    for (int i = 0; i < NAMES_CACHE; i++)
        if (cache->from[i] == kwnames)
            return Py_NewRef(cache->to[i]);
    return NULL;
}

static PyObject *
cache_put(NamesCache *cache, PyObject *kwnames, PyObject *derived)
{
    int i = cache->next;
    cache->next = (i + 1) % NAMES_CACHE;
    Py_XSETREF(cache->from[i], Py_NewRef(kwnames));
    Py_XSETREF(cache->to[i], Py_NewRef(derived));
    return derived;
}

static NamesCache with_launch_names, without_grid;

/* kwnames + ("grid", "warmup"): the names of kernel.run's keywords. */
static PyObject *
extended_names(PyObject *kwnames)
{
    if (kwnames == NULL)
        return Py_NewRef(s_grid_warmup);
    PyObject *ext = cache_get(&with_launch_names, kwnames);
    if (ext != NULL)
        return ext;
    if ((ext = PySequence_Concat(kwnames, s_grid_warmup)) == NULL)
        return NULL;
    return cache_put(&with_launch_names, kwnames, ext);
}

/* kwnames without kwnames[a] and kwnames[b] (grid= and warmup=; b may be -1), or NULL (no error
 * set) where nothing is left. The positions follow from the names, so the cache is by identity. */
static PyObject *
names_without(PyObject *kwnames, Py_ssize_t a, Py_ssize_t b)
{
    Py_ssize_t n = PyTuple_GET_SIZE(kwnames), left = n - 1 - (b >= 0);
    if (left == 0)
        return NULL;
    PyObject *rest = cache_get(&without_grid, kwnames);
    if (rest != NULL)
        return rest;
    if ((rest = PyTuple_New(left)) == NULL)
        return NULL;
    for (Py_ssize_t i = 0, j = 0; i < n; i++)
        if (i != a && i != b)
            PyTuple_SET_ITEM(rest, j++, Py_NewRef(PyTuple_GET_ITEM(kwnames, i)));
    return cache_put(&without_grid, kwnames, rest);
}

/* name == interned, for a keyword name (a str): by identity first, as names from code usually are. */
static inline int
same_name(PyObject *name, PyObject *interned)
{
    if (name == interned)
        return 1;
    return PyUnicode_GET_LENGTH(name) == PyUnicode_GET_LENGTH(interned) && PyUnicode_Compare(name, interned) == 0;
}

static PyObject *
raised_exception(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (traceback != NULL)
        PyException_SetTraceback(value, traceback);
    Py_XDECREF(type);
    Py_XDECREF(traceback);
    return value;
#endif
}

/* 1: a value the common case takes; 0: another (the general path decides); -1: error. */
static int
plain_value(PyObject *v)
{
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyLong_Type)
        return 1;
    if (t == (PyTypeObject *)g_tensor || t == (PyTypeObject *)g_parameter) {
        PyObject *meta = g_is_meta != NULL ? Py_TYPE(g_is_meta)->tp_descr_get(g_is_meta, v, (PyObject *)t)
                                           : PyObject_GetAttr(v, s_is_meta);
        if (meta == NULL)
            return -1;
        Py_DECREF(meta);
        return meta == Py_False;
    }
    if (t == &PyFloat_Type || t == &PyBool_Type || t == &PyUnicode_Type || v == Py_None)
        return 1;
    int traced = PyObject_IsInstance(v, g_traceable);
    return traced < 0 ? -1 : !traced;
}

/* 1: a dispatch mode or a functorch transform is active; 0: neither; -1: error. */
static int
modes_active(void)
{
    if (c_stack_len != NULL) {
        if (c_stack_len() != 0)
            return 1;
        void *const *layers = c_layer_stack();
        return layers[0] != layers[1];
    }
    PyObject *depth = PyObject_CallNoArgs(g_stack_len);
    if (depth == NULL)
        return -1;
    int active = PyObject_IsTrue(depth);
    Py_DECREF(depth);
    if (active)
        return active;
    PyObject *interpreter = PyObject_CallNoArgs(g_interpreter);
    if (interpreter == NULL)
        return -1;
    Py_DECREF(interpreter);
    return interpreter != Py_None;
}

/* The keywords an interpreted kernel knows (info.keyword_names), None for a compiled kernel
 * (info.interpreted false), by the KernelInfo (a frozen dataclass), for the last few: a new
 * reference, or NULL with an error set. Strong references to the infos, so an address stays
 * theirs while cached. */
#define KNOWN_CACHE 16
static struct {
    PyObject *info, *known;
} knowns[KNOWN_CACHE];

static PyObject *
known_names(PyObject *info)
{
    size_t slot = ((uintptr_t)info >> 4) % KNOWN_CACHE;
    if (knowns[slot].info == info)
        return Py_NewRef(knowns[slot].known);
    PyObject *interpreted = PyObject_GetAttr(info, s_interpreted);
    if (interpreted == NULL)
        return NULL;
    int check = PyObject_IsTrue(interpreted);
    Py_DECREF(interpreted);
    if (check < 0)
        return NULL;
    PyObject *known = check ? PyObject_GetAttr(info, s_keyword_names) : Py_NewRef(Py_None);
    if (known == NULL)
        return NULL;
    if (known != Py_None && !PyAnySet_Check(known)) {
        Py_DECREF(known);
        PyErr_SetString(PyExc_TypeError, "KernelInfo.keyword_names is not a set");
        return NULL;
    }
    PyObject *old_info = knowns[slot].info, *old_known = knowns[slot].known;
    knowns[slot].info = Py_NewRef(info);
    knowns[slot].known = Py_NewRef(known);
    Py_XDECREF(old_info); /* last: they may run code */
    Py_XDECREF(old_known);
    return known;
}

/* 1: the common case; 0: not; -1: error. The call's keywords are the first nkw of kwnames. */
static int
common_case(PyObject *info, PyObject *grid, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
            Py_ssize_t nkw)
{
    if (!PyTuple_CheckExact(grid))
        return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(grid);
    if (n < 1 || n > 3)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!PyLong_CheckExact(PyTuple_GET_ITEM(grid, i)))
            return 0;
    int active = modes_active();
    if (active)
        return active < 0 ? -1 : 0;
    for (Py_ssize_t i = 0; i < nargs + nkw; i++) {
        int ok = plain_value(args[i]);
        if (ok <= 0)
            return ok;
    }
    if (nkw == 0)
        return 1;
    PyObject *known = known_names(info);
    if (known == NULL)
        return -1;
    if (known == Py_None)
        Py_CLEAR(known);
    int result = 1;
    for (Py_ssize_t i = 0; i < nkw && result == 1; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        /* the launch's own keywords: Python raises on the repeated keyword; let it */
        if (same_name(name, s_grid) || same_name(name, s_warmup))
            result = 0;
        else if (known != NULL) {
            int has = PySet_Contains(known, name);
            result = has < 0 ? -1 : has;
        }
    }
    Py_XDECREF(known);
    return result;
}

static PyObject *
packed(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, Py_ssize_t nkw, PyObject **kwargs)
{
    PyObject *tuple = PyTuple_New(nargs);
    if (tuple == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++)
        PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]));
    *kwargs = PyDict_New();
    if (*kwargs == NULL) {
        Py_DECREF(tuple);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nkw; i++) {
        if (PyDict_SetItem(*kwargs, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0) {
            Py_DECREF(tuple);
            Py_CLEAR(*kwargs);
            return NULL;
        }
    }
    return tuple;
}

/* general(kernel, info, grid, args, kwargs): kernel.py's _launch, which checks everything. */
static PyObject *
general(PyObject *kernel, PyObject *info, PyObject *grid, PyObject *const *args, Py_ssize_t nargs,
        PyObject *kwnames, Py_ssize_t nkw)
{
    PyObject *kwargs;
    PyObject *tuple = packed(args, nargs, kwnames, nkw, &kwargs);
    if (tuple == NULL)
        return NULL;
    PyObject *result = PyObject_CallFunctionObjArgs(g_general, kernel, info, grid, tuple, kwargs, NULL);
    Py_DECREF(tuple);
    Py_DECREF(kwargs);
    return result;
}

/* kernel[grid](*args, **kwargs), the keywords the first nkw names of kwnames. run_names: the
 * names of kernel.run's keywords (kwnames' first nkw and "grid", "warmup") where the caller has
 * them (`.run(..., grid=g, warmup=False)`: its own kwnames), else NULL. */
static PyObject *
launch(PyObject *kernel, PyObject *info, PyObject *grid, PyObject *const *args, Py_ssize_t nargs,
       PyObject *kwnames, Py_ssize_t nkw, PyObject *run_names)
{
    int common = common_case(info, grid, args, nargs, kwnames, nkw);
    if (common < 0)
        return NULL;
    if (!common)
        return general(kernel, info, grid, args, nargs, kwnames, nkw);
    Py_ssize_t total = 1 + nargs + nkw + 2;
    PyObject *small[16];
    PyObject **stack = total <= 16 ? small : PyMem_Malloc(total * sizeof(PyObject *));
    if (stack == NULL)
        return PyErr_NoMemory();
    PyObject *names = run_names != NULL ? Py_NewRef(run_names) : extended_names(nkw ? kwnames : NULL);
    if (names == NULL) {
        if (stack != small)
            PyMem_Free(stack);
        return NULL;
    }
    stack[0] = kernel;
    memcpy(stack + 1, args, (nargs + nkw) * sizeof(PyObject *));
    stack[1 + nargs + nkw] = grid;
    stack[2 + nargs + nkw] = Py_False;
    /* kernel.run(*args, **kwargs, grid=grid, warmup=False): what kernel[grid](...) runs */
    PyObject *result = PyObject_VectorcallMethod(s_run, stack, (1 + nargs), names);
    Py_DECREF(names);
    if (stack != small)
        PyMem_Free(stack);
    if (result != NULL || !PyErr_ExceptionMatches(PyExc_Exception))
        return result;
    /* _after_failure(error, ...) while the error is being handled, as in an except block */
    PyObject *error = raised_exception();
    PyObject *kwargs;
    PyObject *tuple = packed(args, nargs, kwnames, nkw, &kwargs);
    if (tuple == NULL) {
        Py_DECREF(error);
        return NULL;
    }
    PyObject *handled = PyErr_GetHandledException();
    PyErr_SetHandledException(error);
    result = PyObject_CallFunctionObjArgs(g_after_failure, error, kernel, info, grid, tuple, kwargs, NULL);
    PyErr_SetHandledException(handled);
    Py_XDECREF(handled);
    Py_DECREF(error);
    Py_DECREF(tuple);
    Py_DECREF(kwargs);
    return result;
}

/* --- Bound ------------------------------------------------------------------------------- */

static PyObject *
bound_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Bound *b = (Bound *)self;
    return launch(b->kernel, b->info, b->grid, args, PyVectorcall_NARGS(nargsf), kwnames,
                  kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames), NULL);
}

static int
bound_traverse(Bound *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->kernel);
    Py_VISIT(self->info);
    Py_VISIT(self->grid);
    return 0;
}

static int
bound_clear(Bound *self)
{
    Py_CLEAR(self->kernel);
    Py_CLEAR(self->info);
    Py_CLEAR(self->grid);
    return 0;
}

static void
bound_dealloc(Bound *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    bound_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyMemberDef bound_members[] = {
    {"_kernel", T_OBJECT, offsetof(Bound, kernel), READONLY, NULL},
    {"_info", T_OBJECT, offsetof(Bound, info), READONLY, NULL},
    {"_grid", T_OBJECT, offsetof(Bound, grid), READONLY, NULL},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Bound, vectorcall), READONLY, NULL},
    {NULL},
};

static PyType_Slot bound_slots[] = {
    {Py_tp_doc, "wrap_triton(k)[grid]: calling it launches (Dynamo handles it by type: dynamo.py)."},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, bound_members},
    {Py_tp_traverse, bound_traverse},
    {Py_tp_clear, bound_clear},
    {Py_tp_dealloc, bound_dealloc},
    {0, NULL},
};

static PyType_Spec bound_spec = {
    .name = "functional_triton.kernel._BoundLaunch",
    .basicsize = sizeof(Bound),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
             | Py_TPFLAGS_DISALLOW_INSTANTIATION | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = bound_slots,
};

static PyTypeObject *BoundType, *LauncherType;

static PyObject *
new_bound(PyObject *kernel, PyObject *info, PyObject *grid)
{
    Bound *b = PyObject_GC_New(Bound, BoundType);
    if (b == NULL)
        return NULL;
    b->vectorcall = bound_vectorcall;
    b->kernel = Py_NewRef(kernel);
    b->info = Py_NewRef(info);
    b->grid = Py_NewRef(grid);
    PyObject_GC_Track(b);
    return (PyObject *)b;
}

/* --- Launcher ---------------------------------------------------------------------------- */

static PyObject *
launcher_subscript(Launcher *self, PyObject *grid)
{
    if (self->kernel == NULL || self->info == NULL) {
        PyErr_SetString(PyExc_AttributeError, "kernel");
        return NULL;
    }
    return new_bound(self->kernel, self->info, grid);
}

/* run(*args, grid=None, warmup=False, **kwargs): the common case here, the rest in Python. */
static PyObject *
launcher_run(Launcher *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    Py_ssize_t at = -1, wat = -1;
    int simple = self->kernel != NULL && self->info != NULL && nargs + nkw <= 64;
    for (Py_ssize_t i = 0; i < nkw && simple; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (same_name(name, s_grid))
            at = i;
        else if (same_name(name, s_warmup))
            wat = i;
    }
    if (wat >= 0 && args[nargs + wat] != Py_False)
        simple = 0; /* warmup= other than False: Python's run evaluates it (`if warmup:`) */
    if (!simple || at < 0 || args[nargs + at] == Py_None) {
        /* no grid (or grid=None), warmup= other than False, or very many arguments: the Python run */
        PyObject *small[16];
        Py_ssize_t total = 1 + nargs + nkw;
        PyObject **stack = total <= 16 ? small : PyMem_Malloc(total * sizeof(PyObject *));
        if (stack == NULL)
            return PyErr_NoMemory();
        stack[0] = (PyObject *)self;
        memcpy(stack + 1, args, (nargs + nkw) * sizeof(PyObject *));
        PyObject *result = PyObject_Vectorcall(g_run_slow, stack, 1 + nargs, kwnames);
        if (stack != small)
            PyMem_Free(stack);
        return result;
    }
    PyObject *grid = args[nargs + at];
    if (at == nkw - 2 && wat == nkw - 1)
        /* `.run(..., grid=g, warmup=False)`, as kernel.run is called: kernel.run's own names */
        return launch(self->kernel, self->info, grid, args, nargs, kwnames, nkw - 2, kwnames);
    /* the launch without grid= (and a false warmup=): its values and names with those left out */
    PyObject *rest = names_without(kwnames, at, wat);
    if (rest == NULL && PyErr_Occurred())
        return NULL;
    PyObject *values[64];
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < nargs + nkw; i++)
        if (i != nargs + at && (wat < 0 || i != nargs + wat))
            values[n++] = args[i];
    PyObject *result = launch(self->kernel, self->info, grid, values, nargs, rest,
                              rest == NULL ? 0 : PyTuple_GET_SIZE(rest), NULL);
    Py_XDECREF(rest);
    return result;
}

static PyMethodDef launcher_methods[] = {
    {"run", (PyCFunction)(void (*)(void))launcher_run, METH_FASTCALL | METH_KEYWORDS,
     "run(*args, grid, warmup=False, **kwargs): launch like kernel.run(*args, grid=grid, "
     "warmup=False, **kwargs).\n\nwarmup=True compiles without launching, as the raw kernel does."},
    {NULL},
};

static PyMemberDef launcher_members[] = {
    {"kernel", T_OBJECT_EX, offsetof(Launcher, kernel), 0, "the wrapped Triton kernel"},
    {"info", T_OBJECT_EX, offsetof(Launcher, info), 0, "its KernelInfo"},
    {NULL},
};

static int
launcher_traverse(Launcher *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->kernel);
    Py_VISIT(self->info);
    return 0;
}

static int
launcher_clear(Launcher *self)
{
    Py_CLEAR(self->kernel);
    Py_CLEAR(self->info);
    return 0;
}

static void
launcher_dealloc(Launcher *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    launcher_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyType_Slot launcher_slots[] = {
    {Py_tp_doc, "The base of TritonKernel: the launch path's common case in C."},
    {Py_mp_subscript, launcher_subscript},
    {Py_tp_methods, launcher_methods},
    {Py_tp_members, launcher_members},
    {Py_tp_traverse, launcher_traverse},
    {Py_tp_clear, launcher_clear},
    {Py_tp_dealloc, launcher_dealloc},
    {0, NULL},
};

static PyType_Spec launcher_spec = {
    .name = "functional_triton.kernel.Launcher",
    .basicsize = sizeof(Launcher),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
    .slots = launcher_slots,
};

/* --- module functions -------------------------------------------------------------------- */

/* Recent hits of _infos by kernel address, each checked by its weakref on use: a tuple whose
 * weakref leads to this kernel is this kernel's entry (an entry is replaced only after its kernel
 * died; launch_spec.kernel_info). Strong references to the tuples only, never to a kernel. */
#define HIT_CACHE 32
static struct {
    void *kernel; /* an address, never dereferenced */
    PyObject *hit;
} hits[HIT_CACHE];

static int
hit_is_for(PyObject *hit, PyObject *kernel)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *target;
    if (PyWeakref_GetRef(PyTuple_GET_ITEM(hit, 0), &target) <= 0) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(target); /* the caller holds kernel */
    return target == kernel;
#else
    return PyWeakref_GET_OBJECT(PyTuple_GET_ITEM(hit, 0)) == kernel;
#endif
}

/* The _infos entry of kernel (borrowed), or NULL with or without an error set. */
static PyObject *
lookup_hit(PyObject *kernel)
{
    size_t slot = ((uintptr_t)kernel >> 4) % HIT_CACHE;
    PyObject *hit = hits[slot].hit;
    if (hit != NULL && hits[slot].kernel == (void *)kernel && hit_is_for(hit, kernel))
        return hit;
    Py_hash_t hash = PyBaseObject_Type.tp_hash(kernel); /* object.__hash__ (Note [kernel keys]) */
    PyObject *key = PyLong_FromSsize_t(hash);
    if (key == NULL)
        return NULL;
    hit = PyDict_GetItemWithError(g_infos, key); /* borrowed */
    Py_DECREF(key);
    if (hit == NULL || !PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) != 2
        || !PyWeakref_CheckRef(PyTuple_GET_ITEM(hit, 0)))
        return NULL;
    PyObject *old = hits[slot].hit;
    hits[slot].kernel = (void *)kernel;
    hits[slot].hit = Py_NewRef(hit);
    Py_XDECREF(old); /* last: it may run code */
    return hit;
}

/* A new TritonKernel for a kernel described before; NULL with no error set where it was not. */
static PyObject *
wrapper_for(PyObject *kernel)
{
    PyObject *hit = lookup_hit(kernel);
    if (hit == NULL)
        return NULL;
    PyObject *info = Py_NewRef(PyTuple_GET_ITEM(hit, 1));
    Launcher *w = (Launcher *)g_wrapper_type->tp_alloc(g_wrapper_type, 0);
    if (w == NULL) {
        Py_DECREF(info);
        return NULL;
    }
    w->kernel = Py_NewRef(kernel);
    w->info = info;
    return (PyObject *)w;
}

/* --- wrap_triton ------------------------------------------------------------------------- */

/* The public wrap_triton where the module is built: wrapper_for's hit, else kernel.py's
 * _wrap_new(kernel) (the type check and the first description). A function made in C, so the
 * per-launch `wrap_triton(k)` costs no Python frame; its doc is the Python function's. */
static PyObject *g_wrap_new;  /* kernel._wrap_new */
static PyObject *g_wrap_doc;  /* keeps wrap_def.ml_doc's text alive */

static PyObject *
wrap_triton(PyObject *Py_UNUSED(unused), PyObject *kernel)
{
    if (g_infos != NULL && g_wrapper_type != NULL) {
        PyObject *wrapper = wrapper_for(kernel);
        if (wrapper != NULL || PyErr_Occurred())
            return wrapper;
    }
    return PyObject_CallOneArg(g_wrap_new, kernel);
}

static PyMethodDef wrap_def = {"wrap_triton", wrap_triton, METH_O, NULL};

/* make_wrap_triton(wrap_new, doc, module_name): the function above (made once). */
static PyObject *
make_wrap_triton(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *wrap_new, *doc, *module_name;
    if (!PyArg_ParseTuple(args, "OUU", &wrap_new, &doc, &module_name))
        return NULL;
    if (g_wrap_new != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "make_wrap_triton(): made already");
        return NULL;
    }
    const char *text = PyUnicode_AsUTF8(doc);
    if (text == NULL)
        return NULL;
    g_wrap_new = Py_NewRef(wrap_new);
    g_wrap_doc = Py_NewRef(doc);
    wrap_def.ml_doc = text;
    return PyCFunction_NewEx(&wrap_def, NULL, module_name);
}

static PyObject *
configure(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *general_fn, *after, *run_slow, *stack_len, *interp, *tensor, *param, *traceable, *infos,
        *wtype;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOO", &general_fn, &after, &run_slow, &stack_len, &interp,
                          &tensor, &param, &traceable, &infos, &wtype))
        return NULL;
    if (!PyType_Check(tensor) || !PyType_Check(param) || !PyType_Check(wtype) || !PyDict_CheckExact(infos)
        || !PyType_IsSubtype((PyTypeObject *)wtype, LauncherType)) {
        PyErr_SetString(PyExc_TypeError, "configure(): unexpected argument types");
        return NULL;
    }
    Py_XSETREF(g_general, Py_NewRef(general_fn));
    Py_XSETREF(g_after_failure, Py_NewRef(after));
    Py_XSETREF(g_run_slow, Py_NewRef(run_slow));
    Py_XSETREF(g_stack_len, Py_NewRef(stack_len));
    Py_XSETREF(g_interpreter, Py_NewRef(interp));
    Py_XSETREF(g_tensor, Py_NewRef(tensor));
    Py_XSETREF(g_parameter, Py_NewRef(param));
    Py_XSETREF(g_traceable, Py_NewRef(traceable));
    Py_XSETREF(g_infos, Py_NewRef(infos));
    Py_XSETREF(g_wrapper_type, (PyTypeObject *)Py_NewRef(wtype));
    /* `is_meta` read through its descriptor where Tensor and Parameter share one getset
     * descriptor (TensorBase's): what attribute lookup would find, without the lookup. */
    Py_CLEAR(g_is_meta);
    PyObject *on_tensor = _PyType_Lookup((PyTypeObject *)tensor, s_is_meta);
    PyObject *on_param = _PyType_Lookup((PyTypeObject *)param, s_is_meta);
    if (on_tensor != NULL && on_tensor == on_param && Py_TYPE(on_tensor)->tp_descr_get != NULL
        && Py_TYPE(on_tensor)->tp_descr_set != NULL)
        g_is_meta = Py_NewRef(on_tensor);
    Py_RETURN_NONE;
}

/* set_probes(stack_len, layer_stack): the two functions' addresses, or 0, 0 for the Python probes. */
static PyObject *
set_probes(PyObject *Py_UNUSED(module), PyObject *args)
{
    unsigned long long stack_len, layer_stack;
    if (!PyArg_ParseTuple(args, "KK", &stack_len, &layer_stack))
        return NULL;
    if ((stack_len == 0) != (layer_stack == 0)) {
        PyErr_SetString(PyExc_ValueError, "set_probes(): both addresses or neither");
        return NULL;
    }
    c_stack_len = (stack_len_fn)(uintptr_t)stack_len;
    c_layer_stack = (layer_stack_fn)(uintptr_t)layer_stack;
    Py_RETURN_NONE;
}

/* probes(): whether a dispatch mode or functorch transform is active, as a launch reads it. */
static PyObject *
probes(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(unused))
{
    if (c_stack_len == NULL && (g_stack_len == NULL || g_interpreter == NULL)) {
        PyErr_SetString(PyExc_RuntimeError, "probes(): configure() first");
        return NULL;
    }
    int active = modes_active();
    return active < 0 ? NULL : PyBool_FromLong(active);
}

static PyMethodDef module_methods[] = {
    {"configure", configure, METH_VARARGS, "Hand over the Python side of the launch path."},
    {"make_wrap_triton", make_wrap_triton, METH_VARARGS,
     "make_wrap_triton(wrap_new, doc, module_name): the public wrap_triton in C (made once)."},
    {"set_probes", set_probes, METH_VARARGS,
     "set_probes(stack_len, layer_stack): read the mode probes in libtorch (0, 0: through Python)."},
    {"probes", probes, METH_NOARGS, "Whether a dispatch mode or functorch transform is active, as a launch reads it."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, .m_name = "_ft_launch", .m_size = -1, .m_methods = module_methods,
};

#define INTERN(var, text)                                 \
    if ((var = PyUnicode_InternFromString(text)) == NULL) \
        return NULL;

PyMODINIT_FUNC
PyInit__ft_launch(void)
{
    INTERN(s_run, "run");
    INTERN(s_is_meta, "is_meta");
    INTERN(s_interpreted, "interpreted");
    INTERN(s_keyword_names, "keyword_names");
    INTERN(s_grid, "grid");
    INTERN(s_warmup, "warmup");
    if ((s_grid_warmup = PyTuple_Pack(2, s_grid, s_warmup)) == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    BoundType = (PyTypeObject *)PyType_FromSpec(&bound_spec);
    LauncherType = (PyTypeObject *)PyType_FromSpec(&launcher_spec);
    if (BoundType == NULL || LauncherType == NULL
        || PyModule_AddObjectRef(m, "Bound", (PyObject *)BoundType) < 0
        || PyModule_AddObjectRef(m, "Launcher", (PyObject *)LauncherType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
