"""``nbjax.example_libraries.stax``: a tiny neural-network library built from pure functions,
as in ``jax.example_libraries.stax``.

A layer is a pair of functions ``(init_fun, apply_fun)``:

* ``init_fun(rng, input_shape)`` returns ``(output_shape, params)``: the layer works out its
  output shape and draws its parameters, without seeing any data;
* ``apply_fun(params, inputs, **kwargs)`` computes the outputs; the keyword ``rng`` carries a
  PRNG key to layers that need randomness (``Dropout``).

Layer constructors are CamelCase (``Dense(10)``, ``Conv(32, (3, 3))``); layers that need no
arguments are already pairs (``Relu``, ``Flatten``). ``serial`` and ``parallel`` combine
layers into a layer, so a whole network is one ``(init_fun, apply_fun)`` pair whose params
are a pytree that ``nbjax.grad`` differentiates and an optimizer updates::

    init_fun, apply_fun = stax.serial(stax.Dense(64), stax.Relu, stax.Dense(1))
    out_shape, params = init_fun(nbjax.random.key(0), (-1, 3))
    predictions = apply_fun(params, inputs)

A batch size of -1 in the input shape is fine: only the feature axes determine the params.
Like JAX's, this is a teaching example; Flax and Haiku are the full libraries.
"""

import functools
import math

from .. import lax, random
from .. import numpy as jnp
from ..nn import (elu, gelu, leaky_relu, log_softmax, relu, selu, sigmoid, softmax,
                  softplus, standardize)
from ..nn.initializers import glorot_normal, normal, ones, zeros

# The older names JAX keeps for backwards compatibility.
glorot = glorot_normal
randn = normal
logsoftmax = log_softmax


# --- layers with parameters --------------------------------------------------------------------

def Dense(out_dim, W_init=glorot_normal(), b_init=normal()):
    """A fully-connected layer, ``inputs @ W + b``, acting on the last axis."""
    def init_fun(rng, input_shape):
        output_shape = input_shape[:-1] + (out_dim,)
        k1, k2 = random.split(rng)
        W, b = W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,))
        return output_shape, (W, b)

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return jnp.dot(inputs, W) + b
    return init_fun, apply_fun


def _kernel_shape(rhs_spec, lhs_spec, input_shape, out_chan, filter_shape):
    """The kernel's shape in the layout ``rhs_spec`` (say ``'HWIO'``): ``out_chan`` at
    ``'O'``, the input's channel count at ``'I'``, and the filter sizes, in order, at the
    spatial letters."""
    spatial = iter(filter_shape)
    in_chan = input_shape[lhs_spec.index('C')]
    return [out_chan if c == 'O' else in_chan if c == 'I' else next(spatial) for c in rhs_spec]


def _conv_layer(shape_rule, conv, dimension_numbers, out_chan, filter_shape, strides, padding,
                W_init, b_init):
    """The layer pair shared by convolutions and transposed convolutions, which differ only in
    the output-shape rule and the lax operation."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    strides = strides or (1,) * len(filter_shape)
    # The kernel's fans are read from the 'I' and 'O' axes of its layout, wherever they are.
    W_init = W_init or glorot_normal(rhs_spec.index('I'), rhs_spec.index('O'))

    def init_fun(rng, input_shape):
        kernel_shape = _kernel_shape(rhs_spec, lhs_spec, input_shape, out_chan, filter_shape)
        output_shape = shape_rule(input_shape, kernel_shape, strides, padding,
                                  dimension_numbers)
        bias_shape = [out_chan if c == 'C' else 1 for c in out_spec]  # broadcasts per channel
        k1, k2 = random.split(rng)
        W, b = W_init(k1, kernel_shape), b_init(k2, bias_shape)
        return output_shape, (W, b)

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return conv(inputs, W, strides, padding, dimension_numbers) + b
    return init_fun, apply_fun


def _conv(inputs, W, strides, padding, dimension_numbers):
    one = (1,) * len(strides)  # no dilation of the input or of the kernel
    return lax.conv_general_dilated(inputs, W, strides, padding, one, one,
                                    dimension_numbers=dimension_numbers)


def _conv_transpose(inputs, W, strides, padding, dimension_numbers):
    return lax.conv_transpose(inputs, W, strides, padding, dimension_numbers=dimension_numbers)


def GeneralConv(dimension_numbers, out_chan, filter_shape, strides=None, padding='VALID',
                W_init=None, b_init=normal(1e-6)):
    """A convolution layer in any layout: ``dimension_numbers`` is the triple of layout strings
    (input, kernel, output), say ``('NHWC', 'HWIO', 'NHWC')``."""
    return _conv_layer(lax.conv_general_shape_tuple, _conv, dimension_numbers, out_chan,
                       filter_shape, strides, padding, W_init, b_init)


Conv = functools.partial(GeneralConv, ('NHWC', 'HWIO', 'NHWC'))


def GeneralConvTranspose(dimension_numbers, out_chan, filter_shape, strides=None,
                         padding='VALID', W_init=None, b_init=normal(1e-6)):
    """A transposed-convolution layer (the gradient of a strided convolution with respect to
    its input, used to upsample) in any layout, as for ``GeneralConv``."""
    return _conv_layer(lax.conv_transpose_shape_tuple, _conv_transpose, dimension_numbers,
                       out_chan, filter_shape, strides, padding, W_init, b_init)


Conv1DTranspose = functools.partial(GeneralConvTranspose, ('NHC', 'HIO', 'NHC'))
ConvTranspose = functools.partial(GeneralConvTranspose, ('NHWC', 'HWIO', 'NHWC'))


def BatchNorm(axis=(0, 1, 2), epsilon=1e-5, center=True, scale=True, beta_init=zeros,
              gamma_init=ones):
    """Batch normalization: standardize over the ``axis`` axes (by default batch, height and
    width of NHWC images) with the batch's own statistics, then scale by ``gamma`` and shift
    by ``beta``, one per remaining coordinate. There are no running averages: as in JAX's
    example, every call, training or not, uses the statistics of the batch it is given.
    ``center=False`` or ``scale=False`` drops ``beta`` or ``gamma`` (its params become ``()``).
    """
    axis = (axis,) if jnp.isscalar(axis) else axis

    def init_fun(rng, input_shape):
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axis)
        k1, k2 = random.split(rng)
        beta = beta_init(k1, shape) if center else ()
        gamma = gamma_init(k2, shape) if scale else ()
        return input_shape, (beta, gamma)

    def apply_fun(params, x, **kwargs):
        beta, gamma = params
        # Index with None at the normalized axes, so beta and gamma broadcast against x.
        ed = tuple(None if i in axis else slice(None) for i in range(jnp.ndim(x)))
        z = standardize(x, axis, epsilon=epsilon)
        if scale:
            z = gamma[ed] * z
        if center:
            z = z + beta[ed]
        return z
    return init_fun, apply_fun


# --- elementwise layers ------------------------------------------------------------------------

def _same_shape_init(rng, input_shape):
    """The init_fun of a layer without params whose output is shaped like its input."""
    return input_shape, ()


def elementwise(fun, **fun_kwargs):
    """A layer with no params that applies ``fun`` (with ``fun_kwargs``) to its inputs, and
    so keeps their shape."""
    def apply_fun(params, inputs, **kwargs):
        return fun(inputs, **fun_kwargs)
    return _same_shape_init, apply_fun


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


# --- pooling -----------------------------------------------------------------------------------

def _non_spatial_axes(spec, ndim):
    """The batch and channel axes: those of 'N' and 'C' in ``spec``, by default the first and
    the last (NHWC)."""
    if spec is None:
        return 0, ndim - 1
    return spec.index('N'), spec.index('C')


def _with_unit_axes(dims, axes):
    """``dims`` (one entry per spatial axis) with 1 inserted at ``axes``: a window that spans
    one example and one channel."""
    dims = tuple(dims)
    for i in sorted(axes):
        dims = dims[:i] + (1,) + dims[i:]
    return dims


def _window_sizes(inputs, spec, window_shape, strides, padding):
    """How many input elements each window covers: fewer at a padded border, which is why
    ``AvgPool`` divides by this rather than by the window's size."""
    non_spatial = _non_spatial_axes(spec, inputs.ndim)
    spatial_shape = tuple(d for i, d in enumerate(inputs.shape) if i not in non_spatial)
    one = jnp.ones(spatial_shape, dtype=inputs.dtype)
    sizes = lax.reduce_window(one, 0., lax.add, window_shape, strides, padding)
    for i in sorted(non_spatial):
        sizes = jnp.expand_dims(sizes, i)
    return sizes


def _pooling_layer(reducer, init_val, average=False):
    """A pooling layer constructor that reduces every window with ``reducer`` from
    ``init_val`` (and divides by the window's count of inputs when ``average``)."""
    def PoolingLayer(window_shape, strides=None, padding='VALID', spec=None):
        """A pooling layer. ``window_shape`` and ``strides`` give the spatial axes only; the
        batch and channel axes (those of 'N' and 'C' in ``spec``, by default the first and
        the last) are pooled one by one."""
        spatial_strides = strides or (1,) * len(window_shape)
        non_spatial = _non_spatial_axes(spec, len(window_shape) + 2)
        window = _with_unit_axes(window_shape, non_spatial)
        full_strides = _with_unit_axes(spatial_strides, non_spatial)

        def init_fun(rng, input_shape):
            pads = lax.padtype_to_pads(input_shape, window, full_strides, padding)
            no_dilation = (1,) * len(window)
            out_shape = lax.reduce_window_shape_tuple(input_shape, window, full_strides, pads,
                                                      no_dilation, no_dilation)
            return out_shape, ()

        def apply_fun(params, inputs, **kwargs):
            out = lax.reduce_window(inputs, init_val, reducer, window, full_strides, padding)
            if average:
                out = out / _window_sizes(inputs, spec, window_shape, spatial_strides, padding)
            return out
        return init_fun, apply_fun
    return PoolingLayer


MaxPool = _pooling_layer(lax.max, -jnp.inf)
SumPool = _pooling_layer(lax.add, 0.)
AvgPool = _pooling_layer(lax.add, 0., average=True)


# --- shape and plumbing layers -----------------------------------------------------------------
#
# ``Flatten``, ``Identity`` and ``FanInSum`` take no arguments, so they are layers (pairs)
# already: write ``stax.Flatten``, not ``stax.Flatten()``.

def _flatten_init(rng, input_shape):
    return (input_shape[0], math.prod(input_shape[1:])), ()


def _flatten_apply(params, inputs, **kwargs):
    return jnp.reshape(inputs, (inputs.shape[0], -1))


Flatten = (_flatten_init, _flatten_apply)  # all axes but the leading (batch) one into one


def _identity_apply(params, inputs, **kwargs):
    return inputs


Identity = (_same_shape_init, _identity_apply)  # the skip branch of a residual block


def FanOut(num):
    """A layer that hands its input on ``num`` times, as a list: the start of branches that
    ``parallel`` then processes side by side."""
    def init_fun(rng, input_shape):
        return [input_shape] * num, ()

    def apply_fun(params, inputs, **kwargs):
        return [inputs] * num
    return init_fun, apply_fun


def _fan_in_sum_init(rng, input_shape):
    return input_shape[0], ()


def _fan_in_sum_apply(params, inputs, **kwargs):
    return sum(inputs)


FanInSum = (_fan_in_sum_init, _fan_in_sum_apply)  # branches of one shape, added


def FanInConcat(axis=-1):
    """A layer that joins a list of branches by concatenating them along ``axis``."""
    def init_fun(rng, input_shape):
        ax = axis % len(input_shape[0])
        concat_size = sum(shape[ax] for shape in input_shape)
        return input_shape[0][:ax] + (concat_size,) + input_shape[0][ax + 1:], ()

    def apply_fun(params, inputs, **kwargs):
        return jnp.concatenate(inputs, axis)
    return init_fun, apply_fun


_DROPOUT_NEEDS_RNG = (
    "Dropout layer requires apply_fun to be called with a PRNG key argument. That is, instead "
    "of `apply_fun(params, inputs)`, call it like `apply_fun(params, inputs, rng)` where `rng` "
    "is a PRNG key (e.g. from `nbjax.random.key`).")


def Dropout(rate, mode='train'):
    """Dropout: in ``mode='train'``, zero a random part of the inputs and scale the rest up so
    the expected output is the input; in any other mode, the identity.

    Beware JAX's convention, kept here: ``rate`` is the probability of *keeping* an element
    (survivors are divided by ``rate``), not of dropping it. The key comes as the keyword
    ``rng`` of ``apply_fun``.
    """
    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.get('rng', None)
        if rng is None:
            raise ValueError(_DROPOUT_NEEDS_RNG)
        if mode != 'train':
            return inputs
        keep = random.bernoulli(rng, rate, inputs.shape)
        return jnp.where(keep, inputs / rate, 0)
    return _same_shape_init, apply_fun


# --- combinators -------------------------------------------------------------------------------

def _layer_keys(rng, count):
    """One key per layer from ``rng`` (so no two layers draw the same numbers), or ``None``s
    when there is no key."""
    return (None,) * count if rng is None else random.split(rng, count)


def serial(*layers):
    """Compose layers one after the other: the output shape (and outputs) of each is the input
    of the next. The params are a list, one entry per layer. A key ``rng`` given to
    ``apply_fun`` is split into one key per layer."""
    init_funs, apply_funs = zip(*layers)

    def init_fun(rng, input_shape):
        params = []
        for layer_init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, param = layer_init(layer_rng, input_shape)
            params.append(param)
        return input_shape, params

    def apply_fun(params, inputs, **kwargs):
        rngs = _layer_keys(kwargs.pop('rng', None), len(layers))
        for fun, param, rng in zip(apply_funs, params, rngs):
            inputs = fun(param, inputs, rng=rng, **kwargs)
        return inputs
    return init_fun, apply_fun


def parallel(*layers):
    """Apply layers side by side: the combined layer takes a sequence of inputs (and shapes),
    one per layer, and returns the sequence of their outputs. Usually sandwiched between
    ``FanOut`` and ``FanInSum`` or ``FanInConcat``."""
    init_funs, apply_funs = zip(*layers)

    def init_fun(rng, input_shape):
        rngs = random.split(rng, len(layers))
        return zip(*[init(r, shape) for init, r, shape in zip(init_funs, rngs, input_shape)])

    def apply_fun(params, inputs, **kwargs):
        rngs = _layer_keys(kwargs.pop('rng', None), len(layers))
        return [f(p, x, rng=r, **kwargs) for f, p, x, r in zip(apply_funs, params, inputs, rngs)]
    return init_fun, apply_fun


def shape_dependent(make_layer):
    """A layer built only once its input shape is known: ``make_layer(input_shape)`` returns
    the ``(init_fun, apply_fun)`` pair, at init and again at every apply (from the inputs'
    shape)."""
    def init_fun(rng, input_shape):
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params, inputs, **kwargs):
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)
    return init_fun, apply_fun
