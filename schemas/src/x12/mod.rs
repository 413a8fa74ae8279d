//! X12 EDI (contract part 2, Standard formats): 837P and 837I in, the 999 and the 277CA
//! that answer them, and the 835 remittance of a payment.

pub mod ack277ca;
pub mod ack999;
pub mod claim837;
pub mod envelope;
pub mod remit835;
pub mod segments;

#[cfg(test)]
mod tests;
