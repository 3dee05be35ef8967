"""Adjoint programs as PyTorch operators: the generic machinery behind adjoint.mhc.

program_op() defines one torch.library operator (namespace "adjoint") whose CUDA kernel runs an
adjoint Program: the specialization text comes from the arguments, the tensor arguments are
bound by name, and the outputs are returned in a fixed order. A fake (meta) implementation
from a shape function lets torch.compile trace it without running it. with_backward() then
attaches a backward operator through torch.library.register_autograd, saving the tensors the
backward binds. An op of a family is thus a schema, a spec function, a shape function and the
list of saved tensors: a few lines each (see mhc.py).
"""

from .program import prepare

NAMESPACE = "adjoint"
_library = None


def _torch():
    import torch
    return torch


def library():
    """The torch.library.Library("adjoint", "FRAGMENT") every op here is defined in."""
    global _library
    if _library is None:
        _library = _torch().library.Library(NAMESPACE, "FRAGMENT")
    return _library


def program_op(name, schema, tensor_names, output_names, spec_of, fake_outputs):
    """Defines adjoint::<name>(schema) and returns its OpOverload.

    tensor_names: the program's tensor names of the leading Tensor arguments, in order;
    the remaining arguments are attributes passed to spec_of(*tensors, *attributes), which
    returns the specialization text. output_names: the program outputs returned, in order.
    fake_outputs(*args) returns [(shape, dtype)] for each output (for the meta kernel). A schema
    ending in "-> Tensor" returns its one output alone instead of a tuple."""
    torch = _torch()
    lib = library()
    lib.define(name + schema)
    count = len(tensor_names)
    single = schema.rstrip().endswith("-> Tensor")
    if single and len(output_names) != 1:
        raise ValueError("%s: a '-> Tensor' schema returns one output, got %r"
                         % (name, output_names))

    def cuda_kernel(*args):
        tensors, attributes = args[:count], args[count:]
        bound = {n: t.contiguous() for n, t in zip(tensor_names, tensors)}
        program = prepare(spec_of(*tensors, *attributes), device=tensors[0].device)
        outputs = program(bound)
        if single:
            return outputs[output_names[0]]
        return tuple(outputs[n] for n in output_names)

    def fake_kernel(*args):
        device = args[0].device
        results = tuple(args[0].new_empty(shape, dtype=dtype, device=device)
                        for shape, dtype in fake_outputs(*args))
        return results[0] if single else results

    lib.impl(name, cuda_kernel, "CUDA")
    torch.library.register_fake(NAMESPACE + "::" + name, fake_kernel, lib=lib)
    return getattr(getattr(torch.ops, NAMESPACE), name).default


def with_backward(forward, forward_arg_names, backward, backward_args, differentiable):
    """Registers autograd for `forward` ("adjoint::<name>", an op from program_op) through
    `backward` (another op from program_op).

    forward_arg_names: the forward's argument names, in order. backward_args: for each backward
    argument, in order, "grad:<output index>" (that output's gradient, zeros when not used),
    "in:<forward argument name>" or "out:<forward output index>". differentiable: the forward
    argument names the backward's outputs are the gradients of, in the backward's output order."""
    torch = _torch()
    saved_outputs = sorted({int(s.split(":", 1)[1]) for s in backward_args
                            if s.startswith("out:")})
    # outputs whose gradient the backward takes: zeros of their shape when autograd gives None
    grad_outputs = sorted({int(s.split(":", 1)[1]) for s in backward_args
                           if s.startswith("grad:")})

    def setup_context(ctx, inputs, output):
        if isinstance(output, torch.Tensor):
            output = (output,)
        tensors = [v for v in inputs if isinstance(v, torch.Tensor)]
        ctx.save_for_backward(*tensors, *(output[i] for i in saved_outputs))
        ctx.grad_like = {i: (output[i].shape, output[i].dtype, output[i].device)
                         for i in grad_outputs}
        ctx.tensor_count = len(tensors)
        ctx.attributes = {name: v for name, v in zip(forward_arg_names, inputs)
                          if not isinstance(v, torch.Tensor)}

    def grad_of(ctx, *grads):
        saved = ctx.saved_tensors
        outputs = dict(zip(saved_outputs, saved[ctx.tensor_count:]))
        tensor_names = [n for n in forward_arg_names if n not in ctx.attributes]
        by_name = dict(zip(tensor_names, saved[:ctx.tensor_count]))
        by_name.update(ctx.attributes)
        args = []
        for source in backward_args:
            kind, key = source.split(":", 1)
            if kind == "grad":
                index = int(key)
                grad = grads[index]
                if grad is None:
                    shape, dtype, device = ctx.grad_like[index]
                    grad = torch.zeros(shape, dtype=dtype, device=device)
                args.append(grad)
            elif kind == "in":
                args.append(by_name[key])
            else:
                args.append(outputs[int(key)])
        results = backward(*args)
        if isinstance(results, torch.Tensor):
            results = (results,)
        results = dict(zip(differentiable, results))
        return tuple(results.get(name) for name in forward_arg_names)

    torch.library.register_autograd(forward, grad_of, setup_context=setup_context,
                                    lib=library())
