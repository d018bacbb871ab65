"""Window functions by name, for the spectral estimates of ``nbjax.scipy.signal``.

``stft``, ``istft``, ``csd`` and ``welch`` take their window as an array or, as in SciPy, as
a name (``"hann"``) or a tuple of a name and its parameters (``("kaiser", 8.0)``). A window
depends only on static arguments, so it is computed here with NumPy in float64, once, and
enters the computation as a constant.

The windows are *periodic* (SciPy's ``get_window`` default, ``fftbins=True``): a window of
``n`` samples is the symmetric window of ``n + 1`` samples without its last sample, so that
its repetitions tile without a doubled end point, as the segments of a spectrogram do.
"""

import functools

import numpy as np

__all__ = ["get_window"]

# Cosine-sum windows: w(t) = sum_k (-1)^k a_k cos(k t) for t from -pi to pi over the window.
_COSINE_SUMS = {
    "hann": (0.5, 0.5),
    "hamming": (0.54, 0.46),
    "blackman": (0.42, 0.50, 0.08),
    "nuttall": (0.3635819, 0.4891775, 0.1365995, 0.0106411),
    "blackmanharris": (0.35875, 0.48829, 0.14128, 0.01168),
    "flattop": (0.21557895, 0.41663158, 0.277263158, 0.083578947, 0.006947368),
}


def _general_cosine(m, coefficients):
    t = np.linspace(-np.pi, np.pi, m)
    return sum(a * np.cos(k * t) for k, a in enumerate(coefficients))


def _boxcar(m):
    return np.ones(m)


def _bartlett(m):
    """The triangle that is 0 at both ends and 1 in the middle."""
    return 1 - np.abs(2 * np.arange(m) / (m - 1) - 1)


def _triang(m):
    """The triangle whose ends are one step above 0 (SciPy's ``triang``)."""
    return 1 - np.abs(2 * np.arange(m) - (m - 1)) / (m + m % 2)


def _cosine(m):
    return np.sin(np.pi * (np.arange(m) + 0.5) / m)


def _general_hamming(m, alpha):
    return _general_cosine(m, (alpha, 1 - alpha))


def _tukey(m, alpha=0.5):
    """Flat in the middle, with a half cosine period over the ``alpha / 2`` of the window at
    each end (``alpha`` 0 or less: boxcar, 1 or more: Hann)."""
    if alpha <= 0:
        return _boxcar(m)
    distance_to_end = np.minimum(np.arange(m), np.arange(m)[::-1])
    ramp = np.minimum(1.0, 2 * distance_to_end / (min(alpha, 1) * (m - 1)))
    return 0.5 * (1 - np.cos(np.pi * ramp))


def _gaussian(m, std):
    return np.exp(-0.5 * ((np.arange(m) - (m - 1) / 2) / std) ** 2)


def _kaiser(m, beta):
    r = 2 * np.arange(m) / (m - 1) - 1
    return np.i0(beta * np.sqrt(1 - r * r)) / np.i0(beta)


# name -> (symmetric window of m > 1 samples, whether it takes parameters: True, False, or
# "optional"); then SciPy's aliases.
_WINDOWS = {
    "boxcar": (_boxcar, False), "bartlett": (_bartlett, False), "triang": (_triang, False),
    "cosine": (_cosine, False), "general_cosine": (_general_cosine, True),
    "general_hamming": (_general_hamming, True), "tukey": (_tukey, "optional"),
    "gaussian": (_gaussian, True), "kaiser": (_kaiser, True),
    **{name: (functools.partial(_general_cosine, coefficients=a), False)
       for name, a in _COSINE_SUMS.items()},
}
_ALIASES = {
    "box": "boxcar", "ones": "boxcar", "rect": "boxcar", "rectangular": "boxcar",
    "bart": "bartlett", "brt": "bartlett", "triangle": "triang", "tri": "triang",
    "halfcosine": "cosine", "general cosine": "general_cosine",
    "general hamming": "general_hamming", "tuk": "tukey", "gauss": "gaussian",
    "gss": "gaussian", "ksr": "kaiser", "han": "hann", "hamm": "hamming", "ham": "hamming",
    "black": "blackman", "blk": "blackman", "nutl": "nuttall", "nut": "nuttall",
    "blackharr": "blackmanharris", "bkh": "blackmanharris", "flat": "flattop",
    "flt": "flattop",
}
# SciPy's other windows: known names that nbjax does not compute.
_NOT_PROVIDED = ("barthann", "bohman", "chebwin", "dpss", "exponential", "poisson",
                 "general_gaussian", "kaiser_bessel_derived", "lanczos", "parzen", "taylor")


def get_window(window, n):
    """The periodic window ``window`` (a name, or a tuple of a name and its parameters) of
    ``n`` samples, as a float64 NumPy array; SciPy's ``get_window(window, n)``."""
    name, params = (window, ()) if isinstance(window, str) else (window[0], window[1:])
    name = _ALIASES.get(name, name)
    if name not in _WINDOWS:
        if name in _NOT_PROVIDED:
            raise NotImplementedError(
                f"nbjax does not compute the {name!r} window; pass it as an array, e.g. "
                f"scipy.signal.get_window({window!r}, {n}).")
        raise ValueError(f"Invalid window name {name!r} in parameter window={window!r}!")
    symmetric, takes_params = _WINDOWS[name]
    if takes_params is True and not params:
        raise ValueError(f"{name!r} must have parameters, but window={window!r}!")
    if not takes_params and params:
        raise ValueError(f"{name!r} does not allow parameters, but window={window!r}!")
    if n == 1:
        return np.ones(1)
    return symmetric(n + 1, *params)[:-1]

